"""kt_serve's validation and render steps run by real ansible on localhost, with this checkout's ktinfra."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from role_play import PREFLIGHT, changed_site_profile, run_play, stacks_planned, task_output
from test_kt_python_env_rerun import ENV
from test_kt_python_env_rerun import _setup as env_setup

from ktinfra import tune

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "kt_serve"
PLAN = REPO / "molecule" / "serve" / "files" / "plan-tiny.json"
PRESENT = "{{ kt_serve__resolved | rejectattr('state', 'equalto', 'absent') | list }}"  # as tasks/main.yml
PLAY = [
    {
        "hosts": "localhost",
        "gather_facts": False,
        # tasks/main.yml up to the install (systemd or supervisord): validate, plan and render every instance
        # in the run's scratch directory, then keep plans, keys and renders
        "tasks": [
            {"ansible.builtin.include_role": {"name": "kt_serve", "tasks_from": "validate"}},
            {
                "ansible.builtin.tempfile": {"state": "directory", "prefix": "ktinfra-serve."},
                "check_mode": False,
                "register": "kt_serve__scratch",
            },
            {
                "block": [
                    {
                        "ansible.builtin.include_role": {"name": "kt_serve", "tasks_from": "render"},
                        "loop": PRESENT,
                        "loop_control": {"loop_var": "kt_serve__instance"},
                    },
                    {"ansible.builtin.set_fact": {"kt_serve__present": PRESENT}},
                    {"ansible.builtin.include_role": {"name": "kt_serve", "tasks_from": "publish"}},
                ],
                "always": [
                    {
                        "ansible.builtin.file": {"path": "{{ kt_serve__scratch.path }}", "state": "absent"},
                        "check_mode": False,
                    }
                ],
            },
        ],
    }
]


def run_role(tmp: Path, extra: dict, flags: list[str] | None = None) -> tuple[int, str]:
    for sub in ("model", "weights", "lora", "cfg", "render"):
        (tmp / sub).mkdir(exist_ok=True)
    wrapper = tmp / "ktinfra"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m ktinfra "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    play = tmp / "play.yml"
    play.write_text(yaml.safe_dump(PLAY))
    extra_vars = {
        "ansible_python_interpreter": sys.executable,
        "kt_serve_ktinfra": str(wrapper),
        "kt_serve_python": "/usr/bin/python3",
        "kt_serve_config_dir": str(tmp / "cfg"),
        "kt_serve_render_dir": str(tmp / "render"),
        "kt_serve_store_state_file": str(tmp / "no-store.json"),
        "kt_preflight_stack_arg": PREFLIGHT["kt_preflight_stack_arg"],  # render.yml plans for it
    } | extra
    (tmp / "vars.json").write_text(json.dumps(extra_vars))
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_LOCALHOST_WARNING="false")
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local"]
    proc = subprocess.run(
        [*command, str(play), "-e", f"@{tmp / 'vars.json'}", *(flags or [])],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return proc.returncode, proc.stdout + proc.stderr


def instance(tmp: Path, name: str, port: int, **more) -> dict:
    paths = {"model_path": str(tmp / "model"), "weight_path": str(tmp / "weights")}
    return {"name": name, "port": port} | paths | {"plan_file": str(PLAN)} | more


def serve_args(tmp: Path, name: str) -> str:
    env = (tmp / "render" / name / f"ktinfra-serve-{name}.env").read_text()
    line = next(line for line in env.splitlines() if line.startswith("KT_SERVE_ARGS="))
    return line.split("=", 1)[1].strip('"')


OWN = {"max_running_requests": 3, "chunked_prefill_size": 4096}


def _h100_bf16_plan(path: Path) -> Path:
    """Qwen3-30B-A3B on the H100 capture: BF16, all 128 experts on the GPU, nothing deferred; with a GPU
    prefill threshold tuned in by hand before any adapter came."""
    args = ["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--json"]
    proc = subprocess.run([sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    plan["serve"]["kt_gpu_prefill_token_threshold"] = 2048
    path.write_text(json.dumps(plan))
    return path


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("serve")
    bf16 = _h100_bf16_plan(tmp / "bf16.plan.json")
    rc, output = run_role(
        tmp,
        {
            "kt_serve_overrides": {
                "max_running_requests": 7,
                "context_length": 32768,
                "kt_num_gpu_experts": 4,
            },
            "kt_serve_instances": [
                instance(tmp, "plain", 30000),
                instance(tmp, "own", 30001, overrides=OWN),
                instance(tmp, "adapted", 30002, loras={"mine": str(tmp / "lora")}),
                instance(
                    tmp,
                    "adapted-bf16",
                    30003,
                    plan_file=str(bf16),
                    loras={"mine": str(tmp / "lora")},
                    overrides={"max_running_requests": 1},
                ),
            ],
        },
    )
    assert rc == 0, output[-3000:]
    return tmp


def test_kt_serve_overrides_reach_the_rendered_command_line(rendered):
    args = serve_args(rendered, "plain")
    assert "--max-running-requests 7 --context-length 32768" in args
    assert "--chunked-prefill-size 8192" in args and "--kt-num-gpu-experts 4 " in args
    plan = json.loads((rendered / "cfg" / "plain.plan.json").read_text())
    assert plan["serve"]["max_running_requests"] == 7 and plan["serve"]["port"] == 30000


def test_the_unit_reads_its_env_from_kt_serve_config_dir(rendered):
    """Before: `render serve` always wrote EnvironmentFile=/etc/ktinfra/serve/%i.env into the unit."""
    unit = (rendered / "render" / "plain" / "ktinfra-serve@.service").read_text()
    assert f"EnvironmentFile={rendered / 'cfg'}/%i.env" in unit and "/etc/ktinfra/serve" not in unit


def test_an_instances_own_overrides_win(rendered):
    args = serve_args(rendered, "own")
    assert "--chunked-prefill-size 4096 --max-running-requests 3 --context-length 32768" in args
    assert "--port 30001" in args


def test_adapters_still_put_every_expert_in_kt_kernel(rendered):
    args = serve_args(rendered, "adapted")
    assert "--kt-num-gpu-experts 0 " in args and "--enable-lora" in args


def test_adapters_get_a_plan_sglang_kt_starts(rendered):
    """`ktinfra lora plan` puts the adapters on: the 128 experts planned for the GPU move to the CPU with
    the planner's deferral for 0 GPU experts, the threshold goes, the one running request becomes 2."""
    args = serve_args(rendered, "adapted-bf16")
    assert "--kt-num-gpu-experts 0 --kt-max-deferred-experts-per-token 2 --enable-lora" in args
    assert "--kt-gpu-prefill-token-threshold" not in args and "--max-running-requests 2 " in args
    kept = json.loads((rendered / "cfg" / "adapted-bf16.plan.json").read_text())
    assert kept["serve"]["lora"]["paths"] == {"mine": str(rendered / "lora")}


H100 = REPO / "tests" / "fixtures" / "hosts" / "h100-xeon-amx-16c"


def _store(tmp_path: Path) -> tuple[Path, Path]:
    """A model store holding Qwen3-30B-A3B (its config.json, marked complete) and its INT8 CPU weights."""
    model = _qwen3_config(tmp_path / "store" / "Qwen3-30B-A3B")
    (model / ".ktinfra-complete.json").write_text("{}")
    weights = tmp_path / "store" / "Qwen3-30B-A3B-INT8"
    (weights / "_layer_0").mkdir(parents=True)
    entry = {"kind": "model", "path": str(model), "cpu_weights": str(weights), "cpu_weights_format": "int8"}
    _write_store(tmp_path, {"Qwen3-30B-A3B": entry})
    return model, weights


def _qwen3_config(model: Path) -> Path:
    """`model` made, holding Qwen3-30B-A3B's config.json."""
    from ktinfra import catalog

    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(catalog.entry_config("Qwen3-30B-A3B")))
    return model


def _write_store(tmp_path: Path, models: dict) -> None:
    """tmp_path/store.json as kt_model_store writes it, holding `models` (name: entry)."""
    store = {"root": str(tmp_path / "store"), "dirs": {}, "models": models}
    (tmp_path / "store.json").write_text(json.dumps(store))


def _with_store(tmp_path: Path, entry: dict) -> dict:
    """The role's vars serving `entry` from the store _write_store wrote."""
    return {"kt_serve_instances": [entry], "kt_serve_store_state_file": str(tmp_path / "store.json")}


def test_a_store_model_is_planned_in_the_format_of_its_converted_weights(tmp_path):
    """kt_model_store converted the experts to INT8; before, the plan (on the downloaded directory) charged
    the download and the conversion again, chose BF16 on the H100's 68.7 GB free disk, and the unit ran
    --kt-method BF16 with --kt-weight-path pointing at the INT8 weights."""
    model, weights = _store(tmp_path)
    entry = {"name": "stored", "port": 30010, "model": "Qwen3-30B-A3B", "plan_args": ["--from", str(H100)]}
    rc, output = run_role(tmp_path, _with_store(tmp_path, entry))
    assert rc == 0, output[-3000:]
    assert f"--kt-method AMXINT8 --kt-weight-path {weights} " in serve_args(tmp_path, "stored")
    plan = json.loads((tmp_path / "cfg" / "stored.plan.json").read_text())
    assert plan["requirements"]["disk_bytes"] == plan["requirements_breakdown"]["outputs"]


# slow: kt_preflight_stack_arg reaches the instance's `ktinfra plan --stack`:
# test_a_site_profile_that_check_did_not_install_is_planned_from_a_staged_copy; plan_args' own --stack kept
# (kt_common's plan_stack.yml, kt_train's too): test_kt_train_role.py's
# test_runs_are_planned_for_the_stack_preflight_validated
@pytest.mark.slow
def test_instances_are_planned_for_the_stack_preflight_validated(tmp_path):
    """A host whose envs are the legacy kt-0.4-autodl profile. Before, kt_serve ran `ktinfra plan` without
    --stack: the instance was planned (and its unit rendered) for the kt-0.7 stack preflight never checked.
    An instance whose plan_args name their own --stack keeps it."""
    _store(tmp_path)
    from_h100 = ["--from", str(H100)]
    entries = [
        {"name": "legacy", "port": 30010, "model": "Qwen3-30B-A3B", "plan_args": from_h100},
        {"name": "own", "port": 30011, "model": "Qwen3-30B-A3B", "plan_args": [*from_h100, "--stack=kt-0.7"]},
    ]
    rc, output = run_role(
        tmp_path,
        _with_store(tmp_path, entries[0])
        | {"kt_serve_instances": entries, "kt_preflight_stack_arg": "kt-0.4-autodl"},
    )
    assert rc == 0, output[-3000:]
    plans = {
        e["name"]: json.loads((tmp_path / "cfg" / f"{e['name']}.plan.json").read_text()) for e in entries
    }
    assert {name: (plan["stack"], plan["stack_generation"]) for name, plan in plans.items()} == {
        "legacy": ("kt-0.4-autodl", "legacy"),
        "own": ("kt-0.7", "current"),
    }


def test_a_site_profile_that_check_did_not_install_is_planned_from_a_staged_copy(tmp_path):
    """kt_preflight installs a site profile file next to ktinfra and plans with that copy. Before, under
    --check a changed file (kt_preflight_stack_pending) left kt_serve planning with the old copy and a new one
    with a file that does not exist ("gave no plan"). Now the plan reads a copy staged in the run's scratch
    directory, gone with it; a real run plans with the installed copy."""
    from test_kt_python_env_site_profile import PROFILE

    _store(tmp_path)
    entry = {"name": "site", "port": 30010, "model": "Qwen3-30B-A3B", "plan_args": ["--from", str(H100)]}
    ktinfra, installed, controller = changed_site_profile(tmp_path, PROFILE)
    extra = _with_store(tmp_path, entry) | {
        "kt_serve_ktinfra": str(ktinfra),
        "kt_preflight_stack_arg": str(installed),
    }
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    rc, output = run_role(tmp_path, extra)
    assert rc == 0, output[-3000:]
    assert stacks_planned(ktinfra) == [str(installed)]
    assert json.loads((tmp_path / "cfg" / "site.plan.json").read_text())["stack"] == "site"

    pending = extra | {"kt_preflight_stack_pending": str(controller)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(scratch))  # where the run's scratch directory goes, seen to be removed
        rc, output = run_role(tmp_path, pending, ["--check"])
    assert rc == 0, output[-3000:]
    staged = Path(stacks_planned(ktinfra)[-1])
    assert staged.name == ".stack-site.yaml" and staged.parent.parent == scratch
    assert json.loads((tmp_path / "kt" / "bin" / "ktinfra.plan.json").read_text())["stack"] == "site-next"
    assert list(scratch.iterdir()) == [] and yaml.safe_load(installed.read_text())["name"] == "site"
    assert json.loads((tmp_path / "cfg" / "site.plan.json").read_text())["stack"] == "site"


NO_AMX = REPO / "tests" / "fixtures" / "facts" / "xeon8352v-4090-noamx.json"


def _gguf_store(tmp_path: Path) -> tuple[Path, Path, dict]:
    """A store holding Qwen3-30B-A3B's checkpoint config and a GGUF repo (kind: gguf, files to be written by
    the test): (model dir, GGUF repo dir, the kt_serve instance serving it on the no-AMX host's facts)."""
    model = _qwen3_config(tmp_path / "store" / "models" / "Qwen3-30B-A3B")
    gguf = tmp_path / "store" / "gguf" / "Qwen3-GGUF"
    _write_store(tmp_path, {"Qwen3-GGUF": {"kind": "gguf", "path": str(gguf), "cpu_weights": None}})
    entry = {"name": "gguf", "port": 30011, "model": "Qwen3-GGUF", "model_path": str(model),
             "plan_args": ["--facts", str(NO_AMX)]}  # fmt: skip
    return model, gguf, entry


def test_a_stored_gguf_model_is_planned_in_the_quant_it_holds(tmp_path):
    """kt_model_store fetched a GGUF repo (kind: gguf) whose allow pattern took Q8_0: before, the role planned
    every gguf store model as GGUF:Q4_K_M, sizing its experts' RAM at 17.6 GB instead of 30.8 GB; now it
    passes --cpu-format GGUF and `ktinfra plan` reads the quant and the bytes from the files' headers."""
    from gguf_fixture import qwen3_30b

    _, gguf, entry = _gguf_store(tmp_path)
    experts = qwen3_30b(gguf, "Q8_0")
    rc, output = run_role(tmp_path, _with_store(tmp_path, entry))
    assert rc == 0, output[-3000:]
    assert f"--kt-method LLAMAFILE --kt-weight-path {gguf} " in serve_args(tmp_path, "gguf")
    plan = json.loads((tmp_path / "cfg" / "gguf.plan.json").read_text())
    assert plan["serve"]["kt_weight_format"] == "gguf:Q8_0"
    assert plan["requirements_breakdown"]["cpu_experts"] == experts


BAD = {
    "unknown global key": (
        {"kt_serve_overrides": {"gpu_layers": 3}},
        "kt_serve_overrides: unknown key gpu_layers (allowed: chunked_prefill_size, context_length,",
    ),
    "global value of the wrong kind": (
        {"kt_serve_overrides": {"mem_fraction_static": 1.5}},
        "kt_serve_overrides.mem_fraction_static must be a number in (0, 1], got 1.5",
    ),
    "instance value of the wrong kind": (
        {"instance_overrides": {"max_running_requests": "many"}},
        'x: overrides.max_running_requests must be an integer >= 1, got \\"many\\"',
    ),
    "instance unknown key": ({"instance_overrides": {"tp": 2}}, "x: overrides: unknown key tp"),
    "not a mapping": ({"kt_serve_overrides": [1]}, "kt_serve_overrides"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_overrides_fail_before_anything_is_written(tmp_path, case):
    given, message = BAD[case]
    extra = {"kt_serve_overrides": given.get("kt_serve_overrides", {})}
    own = given.get("instance_overrides", {})
    extra["kt_serve_instances"] = [instance(tmp_path, "x", 30000, overrides=own)]
    rc, output = run_role(tmp_path, extra)
    assert rc != 0
    assert message in output, output[-3000:]
    assert list((tmp_path / "cfg").iterdir()) == [] and list((tmp_path / "render").iterdir()) == []


RENDER_REFUSES = {
    "api key with a dollar": (
        {"host": "0.0.0.0", "api_key": "s3cr$t"},
        "contains a quote, backslash, '$' or backtick",
    ),
    "extra arg of two words": ({"extra_args": ["--enable-metrics --log-level debug"]}, "contains ' '"),
    "name over 64 characters": ({"name": "n" * 70}, "must be 1-64 characters"),
}


@pytest.mark.parametrize(
    "case",
    [
        "api key with a dollar",
        # slow: render refuses in scratch space and nothing is kept, as in the "api key with a dollar" case
        # (render's check_word refusal itself: test_render_serve.py, without ansible)
        pytest.param("extra arg of two words", marks=pytest.mark.slow),
        # slow: render refuses in scratch space and nothing is kept, as in the "api key with a dollar" case
        # (the name refusal itself: test_render_serve.py::test_bad_instance_names_are_refused)
        pytest.param("name over 64 characters", marks=pytest.mark.slow),
    ],
)
def test_what_render_refuses_fails_before_anything_is_written(tmp_path, case):
    """Before: the plan, the API key file and the render directory were written, then render failed. Now
    every instance is planned and rendered in scratch space first; a good instance before a bad one is not
    installed either."""
    more, message = RENDER_REFUSES[case]
    bad = instance(tmp_path, "bad", 30001) | more
    rc, output = run_role(tmp_path, {"kt_serve_instances": [instance(tmp_path, "good", 30000), bad]})
    assert rc != 0
    assert message in output, output[-3000:]
    assert list((tmp_path / "cfg").iterdir()) == [] and list((tmp_path / "render").iterdir()) == []


def test_a_plan_file_in_another_format_than_the_stored_weights_is_refused(tmp_path):
    """The store converted INT8 weights; a plan_file that chose BF16 would run --kt-method BF16 on them."""
    model, weights = _store(tmp_path)
    h100_plan = tmp_path / "bf16.json"
    result = subprocess.run(
        [sys.executable, "-m", "ktinfra", "plan", "--model", "Qwen3-30B-A3B", "--json", "--from", str(H100)],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)),
    )  # fmt: skip
    h100_plan.write_text(result.stdout)
    assert json.loads(result.stdout)["serve"]["kt_method"] == "BF16"
    entry = {"name": "stored", "port": 30010, "model": "Qwen3-30B-A3B", "plan_file": str(h100_plan)}
    rc, output = run_role(tmp_path, _with_store(tmp_path, entry))
    assert rc != 0
    assert f"stored: the store holds AMXINT8 weights at {weights}, but the plan's kt_method is BF16" in output
    assert list((tmp_path / "cfg").iterdir()) == []


def test_plan_usage_error_shows_ktinfras_message_not_a_json_error(tmp_path):
    entry = instance(tmp_path, "x", 30000, plan_args=["--context-length", "32768"])
    del entry["plan_file"]
    rc, output = run_role(tmp_path, {"kt_serve_instances": [entry]})
    assert rc != 0
    assert "x: `ktinfra plan` gave no plan (rc 1)" in output, output[-3000:]
    assert "No such option" in output and "--context-length" in output
    assert list((tmp_path / "cfg").iterdir()) == [] and list((tmp_path / "render").iterdir()) == []


def test_override_keys_cover_what_tune_writes():
    keys = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["kt_serve__override_keys"]
    plan_only = {"context_length", "max_mamba_cache_size", "kt_numa_nodes"}
    assert set(keys) == set(tune.ANSIBLE_KEYS.values()) | plan_only


def test_every_default_is_an_argument_spec_and_back():
    defaults = set(yaml.safe_load((ROLE / "defaults/main.yml").read_text()))
    specs = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]
    assert defaults == set(specs["options"])
    assert specs["options"]["kt_serve_overrides"]["type"] == "dict"
    assert specs["options"]["kt_serve_instances"]["options"]["overrides"]["type"] == "dict"


def test_plan_args_example_is_a_real_plan_option():
    text = (ROLE / "defaults/main.yml").read_text()
    example = text.split("plan_args: ", 1)[1].splitlines()[0].split("#")[0]
    flag = json.loads(example)[0]
    from typer.testing import CliRunner

    from ktinfra.cli import app

    assert flag in CliRunner().invoke(app, ["plan", "--help"], terminal_width=200).output


# slow: a loopback bind other than 127.0.0.1 passes through the same ktinfra_is_loopback filter in
# test_kt_common_loopback.py::test_kt_serve_binds_an_unusual_loopback_spelling_without_a_key; 10.0.0.2 without
# a key refused: test_serve_review_api_key.py::test_a_null_api_key_is_no_key
@pytest.mark.slow
def test_any_loopback_address_binds_without_a_key(tmp_path):
    """ktinfra's rule (127.0.0.0/8, ::1); before, the role refused 127.0.0.2 'without api_key'."""
    rc, output = run_role(
        tmp_path, {"kt_serve_instances": [instance(tmp_path, "lo2", 30005, host="127.0.0.2")]}
    )
    assert rc == 0, output[-3000:]
    assert "--host 127.0.0.2 " in serve_args(tmp_path, "lo2")
    rc, output = run_role(
        tmp_path, {"kt_serve_instances": [instance(tmp_path, "pub", 30006, host="10.0.0.2")]}
    )
    assert rc != 0 and "pub: binds 10.0.0.2 without api_key" in output, output[-3000:]


@pytest.mark.parametrize(
    "given",
    [
        # slow: the role serves the plan's quant folder, not the store's path, as in the plan_file case;
        # `ktinfra plan` picks the folder: test_gguf_weights.py::test_the_one_quant_folder_is_planned
        pytest.param("planned", marks=pytest.mark.slow),
        "plan_file",
    ],
)
def test_a_stored_gguf_repo_with_its_quant_in_a_folder_is_served_from_that_folder(tmp_path, given):
    """unsloth's GGUF repos keep each quant in a folder; a store allow pattern fetched one. kt-kernel reads
    only the .gguf files directly in --kt-weight-path: before, the plan stopped and asked for the folder."""
    from gguf_fixture import qwen3_30b

    model, gguf, entry = _gguf_store(tmp_path)
    qwen3_30b(gguf / "Q4_K_M", "Q4_K_M")
    (gguf / "README.md").write_text("x")
    if given == "plan_file":  # made on the store's directory: it names the folder, which the role must keep
        from ktinfra.planner import load_facts, plan

        made = plan(load_facts(NO_AMX), str(model), "serve", cpu_format="GGUF", weight_path=str(gguf))
        (tmp_path / "made.json").write_text(json.dumps(made))
        entry = {k: v for k, v in entry.items() if k != "plan_args"} | {
            "plan_file": str(tmp_path / "made.json")
        }
    rc, output = run_role(tmp_path, _with_store(tmp_path, entry))
    assert rc == 0, output[-3000:]
    assert f"--kt-method LLAMAFILE --kt-weight-path {gguf / 'Q4_K_M'} " in serve_args(tmp_path, "gguf")
    plan = json.loads((tmp_path / "cfg" / "gguf.plan.json").read_text())
    assert (plan["serve"]["kt_weight_format"], plan["serve"]["kt_weight_path"]) == (
        "gguf:Q4_K_M",
        str(gguf / "Q4_K_M"),
    )


STRING_FOR_A_LIST = {
    "extra_args": ("--enable-metrics", "x: extra_args must be a list, one word each, e.g. [--enable"),
    "plan_args": ("--cpu-format AMXINT4", "x: plan_args must be a list, one word each"),
    "loras": ("mine", "x: loras must be a list of adapter names or a mapping name: directory"),
}


@pytest.mark.parametrize("key", sorted(STRING_FOR_A_LIST))
def test_a_string_where_a_list_is_due_is_refused_before_anything_is_written(tmp_path, key):
    """The argument spec passes `extra_args: --enable-metrics` (it checks a copy converted to a list). Before,
    the role took the string letter by letter: the unit ran `... - - e n a b l e - m e t r i c s`, loras
    looked for adapters /m, /i, /n, /e, and plan_args failed with "can only concatenate list (not str)"."""
    value, message = STRING_FOR_A_LIST[key]
    rc, output = run_role(tmp_path, {"kt_serve_instances": [instance(tmp_path, "x", 30000, **{key: value})]})
    assert rc != 0
    assert message in output, output[-3000:]
    assert list((tmp_path / "cfg").iterdir()) == [] and list((tmp_path / "render").iterdir()) == []


def test_an_instance_being_removed_needs_no_model_in_the_store(tmp_path):
    """Decommissioning: state: absent, and the model dropped from kt_model_store_models (so from store.json).
    Before: the role refused the whole serve list, "old: model Gone-Model is not in the model store", and the
    instance could not be removed."""
    gone = {"name": "old", "model": "Gone-Model", "port": 30001, "state": "absent"}
    rc, output = run_role(tmp_path, {"kt_serve_instances": [instance(tmp_path, "keep", 30000), gone]})
    assert rc == 0, output[-3000:]
    assert (tmp_path / "cfg" / "keep.plan.json").exists()
    assert not (tmp_path / "cfg" / "old.plan.json").exists()


@pytest.mark.parametrize(("interval", "timeout"), [(0, 1800), (10, -1)])
def test_a_health_wait_that_cannot_work_is_refused_before_any_change(tmp_path, interval, timeout):
    """Before: an interval of 0 divided by zero in the health wait's retries, after the units were in."""
    extra = {
        "kt_serve_instances": [],
        "kt_serve_health_interval": interval,
        "kt_serve_health_timeout": timeout,
    }
    rc, output = run_role(tmp_path, extra)
    assert rc != 0
    assert "kt_serve_health_interval must be at least 1 second" in output, output[-3000:]
    assert list((tmp_path / "cfg").iterdir()) == [] and list((tmp_path / "render").iterdir()) == []


@pytest.mark.slow
def test_an_env_whose_install_did_not_finish_is_not_served(tmp_path):
    """kt_python_env's first install of the serving env failed (its index down): the env has its pins and no
    finished install. Before: kt_serve planned, rendered and kept units that would start on that half-built
    env; now it refuses before anything is written, and serves once an install finished."""
    env_tmp = tmp_path / "envs"
    env_tmp.mkdir()
    env_vars = env_setup(env_tmp, "six==1.16.0")
    dead = env_vars | {"kt_python_env_pip_index_url": "http://127.0.0.1:9/simple"}
    rc, output = run_play(env_tmp, ENV, dead, env={"PIP_CONFIG_FILE": "/dev/null"})
    assert rc != 0, output[-3000:]
    serve = {
        "kt_serve_python": str(env_tmp / "env" / "bin" / "python"),
        "kt_serve_instances": [instance(tmp_path, "half", 30000)],
    }
    rc, output = run_role(tmp_path, serve)
    assert rc != 0 and "the install of its env did not finish (no install of it finished yet)" in output, (
        output[-3000:]
    )
    assert list((tmp_path / "render").iterdir()) == [] and list((tmp_path / "cfg").iterdir()) == []
    rc, output = run_play(env_tmp, ENV, env_vars)  # the index is back: the install finishes
    assert rc == 0, output[-3000:]
    rc, output = run_role(tmp_path, serve)
    assert rc == 0 and (tmp_path / "render" / "half").is_dir(), output[-3000:]


def test_check_before_the_store_is_laid_names_what_cannot_be_previewed(tmp_path):
    """serve.yml --check on a host provisioned but not yet stored: kt_model_store wrote no store.json under
    --check. Before: kt_serve said the model "is not in the model store" (the store play of this very run
    would put it there); now it takes this run's kt_model_store_state and says why the instance cannot be
    previewed before its model is fetched."""
    (tmp_path / "src").mkdir()
    fresh = tmp_path / "fresh"
    extra = PREFLIGHT | {
        "kt_model_store_root": str(fresh / "store"),
        "kt_model_store_prefix": str(fresh / "prefix"),
        "kt_model_store_tool_venv": str(fresh / "venv"),
        "kt_model_store_state_file": str(fresh / "store.json"),
        "kt_model_store_models": [{"name": "m", "source": "local", "repo": str(tmp_path / "src")}],
        "kt_serve_store_state_file": str(fresh / "store.json"),
        "kt_serve_config_dir": str(fresh / "cfg"),
        "kt_serve_instances": [{"name": "m", "model": "m", "port": 30000}],
    }
    roles = [
        {"ansible.builtin.include_role": {"name": "kt_model_store"}},
        {"ansible.builtin.include_role": {"name": "kt_serve", "tasks_from": "validate"}},
    ]
    rc, output = run_play(tmp_path, roles, extra, flags=["--check"])
    assert rc != 0 and "is not in the model store" not in output, output[-3000:]
    assert f"missing on localhost: {fresh / 'store' / 'models' / 'm' / '.ktinfra-complete.json'}" in output
    assert "(--check cannot preview an instance before its model is in the store" in output, output[-3000:]
    assert not fresh.exists()


def test_check_on_a_host_kt_serve_never_ran_on_previews_without_failing(tmp_path):
    """serve.yml --check before the first real run: the configuration and render directories are not there.
    Before: 'Keep the plan of each instance' failed "Destination directory .../cfg-new does not exist" (the
    directory task before it makes nothing under --check). Now the copies into a directory still to be made
    are skipped; that directory's task reports the change. Nothing is written."""
    extra = {
        "kt_serve_config_dir": str(tmp_path / "cfg-new"),
        "kt_serve_render_dir": str(tmp_path / "render-new"),
        "kt_serve_instances": [instance(tmp_path, "a", 30000, host="0.0.0.0", api_key="k3y-123")],
    }
    rc, output = run_role(tmp_path, extra, ["--check"])
    assert rc == 0, output[-3000:]
    assert "changed: [localhost] => (item=" in task_output(output, "Create the configuration directories")
    assert "skipping" in task_output(output, "Keep the plan of each instance"), output[-3000:]
    assert not (tmp_path / "cfg-new").exists() and not (tmp_path / "render-new").exists()


def test_an_npu_lora_backend_is_refused_at_the_start(tmp_path):
    """sglang lists `ascend` among its LoRA backends, but its kernels are Ascend NPU ones; before, the role
    took it, wrote the staged LoRA plan and failed at render (or, before render refused it, in the server's
    first LoRA batch)."""
    tasks = [{"ansible.builtin.include_role": {"name": "kt_serve"}}]
    rc, output = run_play(tmp_path, tasks, {"kt_serve_lora_backend": "ascend", "kt_serve_instances": []})
    assert rc != 0
    assert "value of kt_serve_lora_backend must be one of: triton, csgmv, torch_native, got: ascend" in output
