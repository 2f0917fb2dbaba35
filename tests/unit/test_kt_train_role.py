"""kt_train run by real ansible on localhost (-c local) with this checkout's ktinfra, writing only into
tmp_path; systemctl is a stand-in on PATH that records what it was asked."""

from __future__ import annotations

import hashlib
import json
import stat
import sys
from pathlib import Path

import env_layout
import pytest
import yaml
from role_play import PREFLIGHT, REPO, changed_site_profile, run_play, stacks_planned, task_output
from test_kt_python_env_site_profile import PROFILE  # a small site profile of the current generation
from test_lora import kt_dir, peft_dir

FILES = REPO / "molecule" / "serve" / "files"
# A unit this stand-in started shows as active (as a started training run does); a (re)start of
# ktinfra-lora-convert@NAME converts as the real oneshot would: it leaves the done marker that the installed
# NAME.env names.
SYSTEMCTL = """#!/bin/sh
echo "$*" >> "$KT_TEST_SYSTEMCTL_LOG"
unit=$(eval echo \\${$#})
state=inactive
[ -e "$KT_TEST_SYSTEMCTL_LOG.$unit.active" ] && state=active
case "$1" in
  show) printf 'Id=%s\\nLoadState=loaded\\nActiveState=%s\\n' "$unit" "$state"
        printf 'SubState=dead\\nResult=success\\nUnitFileState=static\\n' ;;
  start|restart) case "$unit" in
    ktinfra-train@*.service) touch "$KT_TEST_SYSTEMCTL_LOG.$unit.active" ;;
    ktinfra-lora-convert@*.service)
      name=${unit#ktinfra-lora-convert@}; name=${name%.service}
      marker=$(sed -n 's/^KT_LORA_MARKER="\\(.*\\)"$/\\1/p' "$KT_TEST_LORA_CONFIG_DIR/$name.env")
      mkdir -p "${marker%/*}" && touch "$marker" ;;
  esac ;;
esac
exit 0
"""


def setup(tmp: Path) -> dict:
    for sub in ("model", "datasets", "outputs", "loras", "cfg", "render", "units", "bin"):
        (tmp / sub).mkdir(exist_ok=True)
    (tmp / "model" / "config.json").write_text("{}")
    store = {"root": str(tmp), "models": {"tiny": {"kind": "model", "path": str(tmp / "model")}},
             "dirs": {d: str(tmp / d) for d in ("datasets", "outputs", "loras")}}  # fmt: skip
    (tmp / "store.json").write_text(json.dumps(store))
    wrapper = tmp / "bin" / "ktinfra"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m ktinfra "$@"\n')
    systemctl = tmp / "bin" / "systemctl"
    systemctl.write_text(SYSTEMCTL)
    for exe in (wrapper, systemctl):
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return PREFLIGHT | {
        "kt_train_ktinfra": str(wrapper),
        "kt_train_python": "/usr/bin/python3",
        "kt_train_config_dir": str(tmp / "cfg"),
        "kt_train_render_dir": str(tmp / "render"),
        "kt_train_unit_dir": str(tmp / "units"),
        "kt_train_lora_config_dir": str(tmp / "cfg" / "lora"),
        "kt_train_serve_config_dir": str(tmp / "cfg" / "serve"),
        "kt_train_store_state_file": str(tmp / "store.json"),
        "kt_train_datasets": [
            {"name": "tiny_alpaca", "src": str(FILES / "tiny_alpaca.json"), "file_name": "tiny_alpaca.json"}
        ],  # fmt: skip
        # systemd as init, as on a real host (this test machine has none): the stand-in systemctl answers
        "kt_train__sd_booted": {"stat": {"isdir": True}},
    }


def run(name: str = "tiny-sft", **more) -> dict:
    return {
        "name": name,
        "model": "tiny",
        "dataset": "tiny_alpaca",
        "plan_file": str(FILES / "plan-tiny-sft.json"),
    } | more


def train(
    tmp: Path, runs: list, cli: list[str] | None = None, flags: list[str] | None = None, **extra
) -> tuple[int, str]:
    env = {
        "PATH": f"{tmp / 'bin'}:/usr/bin:/bin",
        "KT_TEST_SYSTEMCTL_LOG": str(tmp / "systemctl.log"),
        "KT_TEST_LORA_CONFIG_DIR": extra.get("kt_train_lora_config_dir", str(tmp / "cfg" / "lora")),
        "TMPDIR": str(tmp / "scratch"),  # the role's scratch directory, seen to be removed
    }
    (tmp / "scratch").mkdir(exist_ok=True)
    tasks = [{"ansible.builtin.include_role": {"name": "kt_train"}}]
    return run_play(tmp, tasks, setup(tmp) | {"kt_train_runs": runs} | extra, cli, env=env, flags=flags)


def finished(tmp: Path, name: str) -> Path:
    """The training output of a finished KT run, small but real (`render lora-convert` inspects it as `lora
    serve` does), train_results.json written last as LLaMA-Factory's save_metrics does; the stand-in systemctl
    says the run is inactive with success."""
    out = kt_dir(tmp / "outputs" / name)
    (out / "train_results.json").write_text("{}")
    return out


def scratch_left(tmp: Path) -> list[str]:
    return [p.name for p in (tmp / "scratch").iterdir() if p.name.startswith("ktinfra-train.")]


def systemctl_calls(tmp: Path) -> list[str]:
    log = tmp / "systemctl.log"
    return log.read_text().splitlines() if log.exists() else []


# slow: a run is started when asked and its env file installed in kt_train_config_dir in
# test_kt_train_review10_launcher_secrets.py's
# test_launcher_env_secrets_stay_out_of_vvv_and_job_events_but_reach_the_env_file (start: true, RUN.env
# read back); the unit's EnvironmentFile= and KT_TRAIN_CONFIG under a moved kt_train_config_dir are checked
# here only
@pytest.mark.slow
def test_a_run_is_installed_and_started_when_asked(tmp_path):
    rc, output = train(tmp_path, [run()], ["kt_train_start=true"])
    assert rc == 0, output[-3000:]
    assert (tmp_path / "cfg" / "tiny-sft.yaml").exists() and (
        tmp_path / "units" / "ktinfra-train@.service"
    ).exists()
    assert "start ktinfra-train@tiny-sft.service" in systemctl_calls(tmp_path)
    # the unit reads its env where the role put it: kt_train_config_dir, not render's default /etc/ktinfra
    unit = (tmp_path / "units" / "ktinfra-train@.service").read_text()
    assert f"EnvironmentFile={tmp_path / 'cfg'}/%i.env" in unit
    env = (tmp_path / "cfg" / "tiny-sft.env").read_text()
    assert f'KT_TRAIN_CONFIG="{tmp_path / "cfg"}/tiny-sft.yaml"' in env


def test_kt_train_start_false_as_a_string_does_not_start(tmp_path):
    """Before: -e kt_train_start=false is the string "false", which `when:` took as true: the run started."""
    rc, output = train(tmp_path, [run()], ["kt_train_start=false"])
    assert rc == 0, output[-3000:]
    assert (tmp_path / "cfg" / "tiny-sft.yaml").exists()
    assert not [c for c in systemctl_calls(tmp_path) if c.startswith("start")]


def test_run_problems_name_the_run_and_the_dataset(tmp_path):
    """Before: the messages read `\\1: run name must match …` and `dataset \\1 is not registered`."""
    runs = [run("Bad_Name"), run("other", model="absent"), run("third", dataset="tiny_alpaca, nope")]
    runs.append(run("fourth", dataset=["tiny_alpaca", "nope"]))  # before: the check crashed on 'split'
    rc, output = train(tmp_path, runs)
    assert rc != 0
    assert "fourth: dataset must be one string, the names separated by commas (a,b), not a list" in output
    assert "Bad_Name: run name must match [a-z0-9][a-z0-9_-]*" in output, output[-3000:]
    assert "other: model is not in the model store and no model_path is given" in output
    assert "dataset nope is not registered" in output
    assert "\\1" not in output


# slow: the same "Check the runs" assert, its model clauses next to this one, names the run in
# test_run_problems_name_the_run_and_the_dataset (this clause's own message is checked here only)
@pytest.mark.slow
def test_a_run_without_model_or_model_path_is_named(tmp_path):
    """Before: "object of type 'dict' has no attribute 'model'" from the store check."""
    entry = run("nomodel")
    del entry["model"]
    rc, output = train(tmp_path, [entry])
    assert rc != 0
    assert "nomodel: give model (a kt_model_store model) or model_path" in output, output[-3000:]
    assert "has no attribute" not in output
    assert not (tmp_path / "render" / "nomodel").exists()


def test_plan_args_given_as_a_string_is_named_before_anything_is_written(tmp_path):
    """The argument spec passes `plan_args: --cutoff-len 4096` (it checks a copy converted to a list).
    Before: the plan task failed with "can only concatenate list (not _AnsibleTaggedStr) to list"."""
    entry = run("stringy", plan_args="--cutoff-len 4096")
    del entry["plan_file"]
    rc, output = train(tmp_path, [entry])
    assert rc != 0
    assert "stringy: plan_args must be a list, one word each, not a string" in output, output[-3000:]
    assert "can only concatenate" not in output
    for sub in ("cfg", "render", "units", "datasets", "outputs"):
        assert list((tmp_path / sub).iterdir()) == [], sub


# slow: installing a run before every run is planned is installing it before every run is rendered:
# test_every_run_is_rendered_before_anything_is_installed fails on it
@pytest.mark.slow
def test_every_run_is_checked_and_planned_before_anything_is_installed(tmp_path):
    """Before: the datasets were copied and registered, and the first run installed and started, before the
    second run's infeasible plan stopped the play."""
    infeasible = json.loads((FILES / "plan-tiny-sft.json").read_text()) | {
        "feasible": False,
        "problems": ["no GPU"],
    }
    (tmp_path / "infeasible.json").write_text(json.dumps(infeasible))
    runs = [run("first"), run("second", plan_file=str(tmp_path / "infeasible.json"))]
    rc, output = train(tmp_path, runs, ["kt_train_start=true"])
    assert rc != 0
    assert "second: sft plan infeasible: no GPU" in output, output[-3000:]
    for sub in ("cfg", "render", "units", "datasets", "outputs"):
        assert list((tmp_path / sub).iterdir()) == [], sub
    assert systemctl_calls(tmp_path) == []


def test_a_dataset_missing_on_the_host_stops_before_anything_is_written(tmp_path):
    extra = {"kt_train_datasets": [{"name": "tiny_alpaca", "src": str(FILES / "tiny_alpaca.json"),
                                    "file_name": "tiny_alpaca.json"},
                                   {"name": "absent", "file_name": "absent.json"}]}  # fmt: skip
    rc, output = train(tmp_path, [run()], **extra)
    assert rc != 0 and "absent" in output, output[-3000:]
    for sub in ("cfg", "render", "units", "datasets", "outputs"):
        assert list((tmp_path / sub).iterdir()) == [], sub


def test_every_run_is_rendered_before_anything_is_installed(tmp_path):
    """Before: each run was rendered and installed in turn (datasets registered first), so a render that
    failed for the second run left the datasets, the first run's recipe, env and unit and the second run's
    plan installed, and the first run started."""
    runs = [run("first"), run("second", dataset="tiny_alpaca,tiny_alpaca")]
    rc, output = train(tmp_path, runs, ["kt_train_start=true"])
    assert rc != 0
    assert "names tiny_alpaca twice" in output, output[-3000:]
    for sub in ("cfg", "render", "units", "datasets", "outputs"):
        assert list((tmp_path / sub).iterdir()) == [], sub
    assert systemctl_calls(tmp_path) == []
    assert scratch_left(tmp_path) == []


# slow: the same unit-checksum assert refuses a legacy and a current run in the first play of
# test_runs_are_planned_for_the_stack_preflight_validated
@pytest.mark.slow
def test_runs_of_two_stack_generations_are_refused_before_anything_is_installed(tmp_path):
    """Before: both rendered ktinfra-train@.service; the one installed last (legacy: llamafactory-cli)
    served every run, so the current-stack run would start without its Accelerate launcher."""
    legacy = REPO / "tests" / "fixtures" / "plans" / "seed002-qwen3-30b-a3b-sft-legacy.json"
    runs = [run("current"), run("legacy", plan_file=str(legacy))]
    rc, output = train(tmp_path, runs, ["kt_train_start=true"])
    assert rc != 0
    assert "one template unit serves every run: current: current, legacy: legacy" in output, output[-3000:]
    for sub in ("cfg", "render", "units", "datasets", "outputs"):
        assert list((tmp_path / sub).iterdir()) == [], sub
    assert systemctl_calls(tmp_path) == []
    assert scratch_left(tmp_path) == []


# slow: the review repro (render's legacy kt_optimize_rule and convert_lora.py under kt_python_env_src_dir) is
# test_render_jobs.py::test_legacy_defaults_are_the_checkouts_kt_python_env_makes
@pytest.mark.slow
def test_a_legacy_run_names_the_checkouts_kt_python_env_made(tmp_path):
    """Review repro: with kt_train_llamafactory_dir and kt_train_lora_converter empty, a legacy run's recipe
    pinned its kt_optimize_rule under /opt/ktinfra/src/LLaMA-Factory and its conversion ran
    /opt/ktinfra/src/sglang/convert_lora.py, where nothing checks them out. Now both are kt_python_env's
    checkouts: kt_python_env_src_dir/<the profile's source name>."""
    legacy = REPO / "tests" / "fixtures" / "plans" / "seed002-qwen3-30b-a3b-sft-legacy.json"
    peft_dir(tmp_path / "outputs" / "old")  # PEFT's adapter: the legacy stack trains no fused expert LoRA
    (tmp_path / "outputs" / "old" / "train_results.json").write_text("{}")  # the run's last write
    runs = [run("old", plan_file=str(legacy), serve_instance="tiny", legacy_lora_convert=True)]
    src = str(tmp_path / "src")
    rc, output = train(tmp_path, runs, kt_python_env_src_dir=src)
    assert rc == 0, output[-3000:]
    recipe = yaml.safe_load((tmp_path / "cfg" / "old.yaml").read_text())
    rule = f"{env_layout.checkout('LLaMA-Factory', src)}/examples/kt_optimize_rules/Qwen3Moe-sft-amx.yaml"
    assert recipe["kt_optimize_rule"] == rule
    unit = (tmp_path / "units" / "ktinfra-lora-convert@.service").read_text()
    assert f" {env_layout.checkout('sglang', src)}/convert_lora.py $KT_LORA_CONVERT_ARGS" in unit, unit


def test_runs_are_planned_for_the_stack_preflight_validated(tmp_path):
    """A host whose envs are the legacy kt-0.4-autodl profile. Before, kt_train ran `ktinfra plan` without
    --stack: the run got a kt-0.7 recipe (Accelerate launcher, no kt_optimize_rule) for the legacy
    LLaMA-Factory env. A run whose plan_args name their own --stack keeps it."""
    from ktinfra import catalog

    model = tmp_path / "qwen3"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(catalog.entry_config("Qwen3-30B-A3B")))
    hosts = REPO / "tests" / "fixtures" / "hosts" / "h100-xeon-amx-16c"
    planned = {"model_path": str(model), "plan_args": ["--from", str(hosts)]}
    legacy = {k: v for k, v in run("legacy").items() if k != "plan_file"} | planned
    own = legacy | {"name": "own", "plan_args": [*planned["plan_args"], "--stack", "kt-0.7"]}
    stack = {"kt_preflight_stack_arg": "kt-0.4-autodl", "kt_python_env_profile": "kt-0.4-autodl"}
    rc, output = train(tmp_path, [legacy, own], **stack)
    assert rc != 0
    assert "one template unit serves every run: legacy: legacy, own: current" in output, output[-3000:]
    rc, output = train(tmp_path, [legacy], **stack)
    assert rc == 0, output[-3000:]
    recipe = yaml.safe_load((tmp_path / "cfg" / "legacy.yaml").read_text())
    assert "kt_optimize_rule" in recipe and not (tmp_path / "cfg" / "legacy.accelerate.yaml").exists()


@pytest.mark.slow
def test_a_site_profile_that_check_did_not_install_is_planned_from_a_staged_copy(tmp_path):
    """kt_preflight installs a site profile file next to ktinfra and plans with that copy. Before, under
    --check a changed file (kt_preflight_stack_pending) left kt_train planning with the old copy and a new one
    with a file that does not exist ("gave no plan"). Now the plan reads a copy staged in the run's scratch
    directory, gone after the run; a real run plans with the installed copy."""
    from ktinfra import catalog

    model = tmp_path / "qwen3"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(catalog.entry_config("Qwen3-30B-A3B")))
    hosts = REPO / "tests" / "fixtures" / "hosts" / "h100-xeon-amx-16c"
    planned = {k: v for k, v in run("site").items() if k != "plan_file"}
    planned |= {"model_path": str(model), "plan_args": ["--from", str(hosts)]}
    ktinfra, installed, controller = changed_site_profile(tmp_path, PROFILE)
    stack = {"kt_train_ktinfra": str(ktinfra), "kt_preflight_stack_arg": str(installed)}

    rc, output = train(tmp_path, [planned], **stack)
    assert rc == 0, output[-3000:]
    assert stacks_planned(ktinfra) == [str(installed)]
    assert json.loads((tmp_path / "kt" / "bin" / "ktinfra.plan.json").read_text())["stack"] == "site"
    recipe = (tmp_path / "cfg" / "site.yaml").read_text()

    rc, output = train(
        tmp_path, [planned], flags=["--check"], **stack, kt_preflight_stack_pending=str(controller)
    )
    assert rc == 0, output[-3000:]
    staged = Path(stacks_planned(ktinfra)[-1])
    assert staged.name == ".stack-site.yaml" and staged.parent.parent == tmp_path / "scratch"
    assert json.loads((tmp_path / "kt" / "bin" / "ktinfra.plan.json").read_text())["stack"] == "site-next"
    assert not staged.exists() and scratch_left(tmp_path) == []
    assert yaml.safe_load(installed.read_text())["name"] == "site"
    assert (tmp_path / "cfg" / "site.yaml").read_text() == recipe

    # a run whose plan_args name their own --stack is planned for it, and nothing is staged
    own = planned | {"plan_args": [*planned["plan_args"], "--stack", "kt-0.7"]}
    rc, output = train(
        tmp_path, [own], flags=["--check"], **stack, kt_preflight_stack_pending=str(controller)
    )
    assert rc == 0, output[-3000:]
    assert stacks_planned(ktinfra)[-1] == "kt-0.7"
    assert "skipping: [localhost]" in task_output(output, "Stage the site profile file that --check")


# slow: two runs of one generation pass the unit-checksum assert in
# test_an_adapter_conversion_that_fails_to_render_installs_no_run too
@pytest.mark.slow
def test_several_runs_of_one_generation_share_the_unit(tmp_path):
    rc, output = train(tmp_path, [run("a"), run("b")])
    assert rc == 0, output[-3000:]
    assert sorted(p.name for p in (tmp_path / "units").iterdir()) == ["ktinfra-train@.service"]
    assert sorted(p.name for p in (tmp_path / "cfg").iterdir() if p.suffix == ".env") == ["a.env", "b.env"]


# slow: the backend that weight_format (or the -INT8 name) picks is render train's:
# test_render_jobs.py::test_converted_experts_train_on_the_backend_they_were_quantized_for
@pytest.mark.slow
def test_converted_expert_weights_reach_the_recipe_with_their_backend(tmp_path):
    """weight_format (or the -INT8 name kt_model_store gives) picks the backend kt-kernel reads them with."""
    runs = [run("a", weight_path="/srv/experts", weight_format="int4"), run("b", weight_path="/srv/q-INT8")]
    rc, output = train(tmp_path, runs)
    assert rc == 0, output[-3000:]
    recipes = {name: yaml.safe_load((tmp_path / "cfg" / f"{name}.yaml").read_text()) for name in ("a", "b")}
    assert (
        recipes["a"]["kt_config"]["kt_backend"] == "AMXINT4"
        and recipes["a"]["kt_weight_path"] == "/srv/experts"
    )
    assert recipes["b"]["kt_config"]["kt_backend"] == "INT8"
    assert recipes["b"]["kt_config"]["kt_expert_weight_format"] == "int8"
    rc, output = train(tmp_path, [run("c", weight_path="/srv/experts", weight_format="fp8")])
    assert rc != 0 and "weight_format" in output and not (tmp_path / "cfg" / "c.yaml").exists()


def test_an_adapter_conversion_that_fails_to_render_installs_no_run(tmp_path):
    """Before: the first run was installed (and the datasets registered) before the second run's adapter
    conversion was rendered and refused."""
    finished(tmp_path, "second")
    runs = [run("first"), run("second", serve_instance="tiny")]
    rc, output = train(tmp_path, runs, kt_train_lora_converter="convert.py")
    assert rc != 0
    assert "--script must be an absolute path, got 'convert.py'" in output, output[-3000:]
    for sub in ("cfg", "render", "units", "datasets", "loras"):
        assert list((tmp_path / sub).iterdir()) == [], sub
    assert sorted(p.name for p in (tmp_path / "outputs").iterdir()) == ["second"]
    assert [c for c in systemctl_calls(tmp_path) if not c.startswith("show")] == []
    assert scratch_left(tmp_path) == []


@pytest.mark.slow
def test_a_finished_run_is_converted_and_handed_over_once(tmp_path):
    output_dir = finished(tmp_path, "done")
    runs = [run("done", serve_instance="tiny"), run("fresh")]
    rc, output = train(tmp_path, runs)
    assert rc == 0, output[-3000:]
    assert (tmp_path / "loras" / "done" / ".ktinfra-convert-done").exists()
    assert not (tmp_path / "loras" / ".done.partial").exists()
    handover = json.loads((tmp_path / "cfg" / "serve" / "tiny--done.lora.json").read_text())
    source = handover.pop("source")
    assert handover == {"instance": "tiny", "name": "done", "path": str(tmp_path / "loras" / "done")}
    config = (output_dir / "adapter_config.json").read_bytes()
    assert source["adapter_config.json"] == {"sha256": hashlib.sha256(config).hexdigest()}
    fused = (output_dir / "fused_expert_lora.safetensors").stat()
    assert source["fused_expert_lora.safetensors"] == {"size": fused.st_size, "mtime": fused.st_mtime}
    assert (tmp_path / "cfg" / "lora" / "done.env").stat().st_mode & 0o777 == 0o600
    lora_unit = (tmp_path / "units" / "ktinfra-lora-convert@.service").read_text()
    assert f"EnvironmentFile={tmp_path / 'cfg' / 'lora'}/%i.env" in lora_unit
    for name in ("done", "fresh"):
        assert (tmp_path / "cfg" / f"{name}.yaml").exists()
        assert (tmp_path / "cfg" / f"{name}.plan.json").exists()
        assert (tmp_path / "render" / name / f"{name}.yaml").exists()
    assert (tmp_path / "render" / "done-lora" / "ktinfra-lora-convert@.service").exists()
    # `state: restarted` of an inactive unit starts it
    assert "start ktinfra-lora-convert@done.service" in systemctl_calls(tmp_path)
    assert scratch_left(tmp_path) == []
    rc, output = train(tmp_path, runs)
    assert rc == 0 and "changed=0" in output, output[-3000:]


def convert_calls(tmp: Path, name: str) -> list[str]:
    return [c for c in systemctl_calls(tmp) if f"lora-convert@{name}" in c and not c.startswith("show")]


def handed_over(output: str) -> bool:
    """The play set kt_train_handed_over (playbooks/train.yml then re-applies kt_serve)."""
    block = task_output(output, "Remember the hand-over")
    return "ok: [localhost]" in block


@pytest.mark.slow
def test_a_retrained_run_is_converted_again_and_handed_over(tmp_path):
    """Review repro (test_rev_train): before, loras/NAME existing was the only check, so a run trained again
    kept its old converted adapter and no hand-over was made. Now the fingerprint of the output a conversion
    read is kept in the adapter's done marker and in the hand-over record; another one converts again into
    the staging directory, swapped in when complete."""
    finished(tmp_path, "done")
    runs = [run("done", serve_instance="tiny")]
    rc, output = train(tmp_path, runs)
    assert rc == 0, output[-3000:]
    assert len(convert_calls(tmp_path, "done")) == 1 and handed_over(output)
    adapter, record = tmp_path / "loras" / "done", tmp_path / "cfg" / "serve" / "tiny--done.lora.json"
    first = json.loads(record.read_text())["source"]
    assert json.loads((adapter / ".ktinfra-convert-done").read_text()) == first
    files = [
        "adapter_config.json",
        "adapter_model.safetensors",
        "conversion",
        "fused_expert_lora.safetensors",
    ]
    assert sorted(first) == files
    (adapter / "adapter_model.safetensors").write_text("old conversion")

    rc, output = train(tmp_path, runs)  # unchanged: no conversion, no hand-over
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert len(convert_calls(tmp_path, "done")) == 1 and not handed_over(output)

    # the run is trained again (16 experts, not 8) and finishes: new adapter files in outputs/done
    retrained = kt_dir(tmp_path / "retrained", experts=16)
    for new in retrained.iterdir():
        new.replace(tmp_path / "outputs" / "done" / new.name)
    (tmp_path / "outputs" / "done" / "train_results.json").write_text("{}")
    rc, output = train(tmp_path, runs)
    assert rc == 0, output[-3000:]
    assert len(convert_calls(tmp_path, "done")) == 2, "the new training output was not converted"
    assert handed_over(output)
    assert sorted(p.name for p in adapter.iterdir()) == [".ktinfra-convert-done"]  # the new conversion only
    second = json.loads(record.read_text())["source"]
    assert second != first and json.loads((adapter / ".ktinfra-convert-done").read_text()) == second
    fused = "fused_expert_lora.safetensors"
    assert (
        second[fused]["size"] == (tmp_path / "outputs" / "done" / fused).stat().st_size > first[fused]["size"]
    )
    assert sorted(p.name for p in (tmp_path / "loras").iterdir()) == ["done"]  # no staging, nothing set aside

    rc, output = train(tmp_path, runs)
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert len(convert_calls(tmp_path, "done")) == 2 and not handed_over(output)


@pytest.mark.slow
def test_another_converter_or_base_model_converts_the_same_output_again(tmp_path):
    """Before, the fingerprint was the training output's files only: a run handed over with a broken
    converter (or converted against another base model) kept that adapter after kt_train_lora_converter or
    the model was fixed, as nothing in the output changed."""
    finished(tmp_path, "done")
    runs = [run("done", serve_instance="tiny")]
    fixed = tmp_path / "convert_fixed.py"
    fixed.write_text("# a converter\n")
    rc, output = train(tmp_path, runs)
    assert rc == 0 and len(convert_calls(tmp_path, "done")) == 1, output[-3000:]
    record = tmp_path / "cfg" / "serve" / "tiny--done.lora.json"
    first = json.loads(record.read_text())["source"]
    (tmp_path / "outputs" / "done" / "train_results.json").touch()  # trained with the recipe installed above

    rc, output = train(tmp_path, runs, kt_train_lora_converter=str(fixed))
    assert rc == 0, output[-3000:]
    assert len(convert_calls(tmp_path, "done")) == 2 and handed_over(output)
    second = json.loads(record.read_text())["source"]
    assert second["conversion"][1] == str(fixed) and first["conversion"][1] != str(fixed)
    assert {k: v for k, v in second.items() if k != "conversion"} == {
        k: v for k, v in first.items() if k != "conversion"
    }
    marker = tmp_path / "loras" / "done" / ".ktinfra-convert-done"
    assert json.loads(marker.read_text()) == second

    rc, output = train(tmp_path, runs, kt_train_lora_converter=str(fixed))  # unchanged: nothing to do
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert len(convert_calls(tmp_path, "done")) == 2 and not handed_over(output)


@pytest.mark.slow
def test_an_adapter_converted_without_a_fingerprint_is_converted_once_more(tmp_path):
    """loras/NAME as the role before the fingerprint left it (an empty done marker): it cannot tell which
    output it came from, so it is converted again, once. A staging directory of another conversion (a done
    marker, no record of its output) is started over, not renamed into place."""
    finished(tmp_path, "done")
    old = tmp_path / "loras" / "done"
    old.mkdir(parents=True)
    (old / ".ktinfra-convert-done").touch()
    (old / "adapter_model.safetensors").write_text("converted by the old role")
    staging = tmp_path / "loras" / ".done.partial"
    staging.mkdir()
    (staging / ".ktinfra-convert-done").touch()
    (staging / "adapter_model.safetensors").write_text("another output's conversion")
    runs = [run("done", serve_instance="tiny")]
    rc, output = train(tmp_path, runs)
    assert rc == 0, output[-3000:]
    assert len(convert_calls(tmp_path, "done")) == 1 and handed_over(output)
    assert sorted(p.name for p in old.iterdir()) == [".ktinfra-convert-done"]
    assert sorted(p.name for p in (tmp_path / "loras").iterdir()) == ["done"]
    rc, output = train(tmp_path, runs)
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert len(convert_calls(tmp_path, "done")) == 1


# slow: the first play of test_kt_train_review8_reboot.py's
# test_a_retrain_with_a_changed_recipe_cut_by_a_reboot_is_not_taken_for_finished starts a run beside a
# complete output too, and that test fails if the play hands it over (its record, loras/)
@pytest.mark.slow
def test_a_run_this_play_starts_is_not_handed_over(tmp_path):
    """A run this play starts is training again, so its old output is not handed over. As before, when the
    unit's state was read after the start; now it is read before (with the renders), and the start is what
    counts."""
    finished(tmp_path, "again")
    rc, output = train(tmp_path, [run("again", serve_instance="tiny", start=True)])
    assert rc == 0, output[-3000:]
    assert "start ktinfra-train@again.service" in systemctl_calls(tmp_path)
    assert not (tmp_path / "cfg" / "serve").exists() and list((tmp_path / "loras").iterdir()) == []


@pytest.mark.slow
def test_check_mode_on_a_fresh_host_renders_every_run_and_writes_nothing(tmp_path):
    """Before: --check copied the renders into configuration directories that --check had not made, and failed
    ("Destination directory ... does not exist"); a finished run's conversion was then looked for as done."""
    finished(tmp_path, "done")
    runs = [run("done", serve_instance="tiny"), run("fresh")]
    fresh = {f"kt_train_{key}": str(tmp_path / "fresh" / key) for key in
             ("config_dir", "lora_config_dir", "serve_config_dir", "render_dir")}  # fmt: skip
    rc, output = train(tmp_path, runs, flags=["--check"], **fresh)
    assert rc == 0, output[-3000:]
    assert not (tmp_path / "fresh").exists()
    for sub in ("units", "datasets", "loras"):
        assert list((tmp_path / sub).iterdir()) == [], sub
    assert [c for c in systemctl_calls(tmp_path) if not c.startswith("show")] == []
    assert scratch_left(tmp_path) == []
    rc, output = train(tmp_path, runs, **fresh)
    assert rc == 0, output[-3000:]
    assert (tmp_path / "fresh" / "serve_config_dir" / "tiny--done.lora.json").exists()
    rc, output = train(tmp_path, runs, flags=["--check"], **fresh)
    assert rc == 0 and "changed=0" in output, output[-3000:]


def test_check_mode_takes_the_store_that_this_run_would_write(tmp_path):
    """train.yml --check on a fresh host: kt_model_store wrote no store.json under --check, and kt_train then
    failed with "File not found: /etc/ktinfra/store.json" even with no run at all. Now it takes this run's
    kt_model_store_state fact; without file or fact it says where the store description comes from."""
    fresh = tmp_path / "fresh"
    extra = PREFLIGHT | {
        "kt_model_store_root": str(fresh / "store"),
        "kt_model_store_prefix": str(fresh / "prefix"),
        "kt_model_store_state_file": str(fresh / "store.json"),
        "kt_train_store_state_file": str(fresh / "store.json"),
        "kt_train_runs": [],
        "kt_train_datasets": [
            {"name": "tiny_alpaca", "src": str(FILES / "tiny_alpaca.json"), "file_name": "tiny_alpaca.json"}
        ],  # fmt: skip
    }
    roles = [{"ansible.builtin.include_role": {"name": name}} for name in ("kt_model_store", "kt_train")]
    rc, output = run_play(tmp_path, roles, extra, flags=["--check"])
    assert rc == 0, output[-3000:]
    assert not fresh.exists()
    rc, output = run_play(tmp_path, roles[1:], extra, flags=["--check"])
    assert rc != 0
    message = f"kt_train reads the model store from {fresh / 'store.json'}, which this host does not have"
    assert message in output, output[-3000:]


def test_a_run_on_an_env_whose_install_did_not_finish_is_refused_before_any_change(tmp_path):
    """The records kt_python_env keeps next to an env (test_kt_serve_role makes them with a real failed
    install): pins that changed since the last install that finished. Before: the run's recipe and unit
    were installed on that half-updated env; now nothing is, until the records agree (or an env set up before
    the record of finished installs has its freeze only)."""
    env = tmp_path / "sft-env"
    (env / "bin").mkdir(parents=True)
    (env / "ktinfra-requirements.txt").write_text("six==1.17.0\n")
    (env / "ktinfra-requirements.installed.txt").write_text("six==1.16.0\n")
    (env / "ktinfra-freeze.txt").write_text("six==1.16.0\n")
    python = {"kt_train_python": str(env / "bin" / "python")}
    rc, output = train(tmp_path, [run()], **python)
    message = (
        f"{env}/bin/python: the install of its env did not finish (its pins changed since the last install"
    )
    assert rc != 0 and message in output, output[-3000:]
    assert list((tmp_path / "cfg").iterdir()) == [] and list((tmp_path / "units").iterdir()) == []
    (env / "ktinfra-requirements.installed.txt").unlink()
    (env / "ktinfra-freeze.txt").unlink()
    rc, output = train(tmp_path, [run()], **python)
    assert rc != 0 and "(no install of it finished yet)" in output, output[-3000:]
    (env / "ktinfra-freeze.txt").write_text("six==1.17.0\n")  # an env installed before the record existed
    rc, output = train(tmp_path, [run()], **python)
    assert rc == 0 and (tmp_path / "cfg" / "tiny-sft.yaml").exists(), output[-3000:]


@pytest.mark.parametrize(
    ("serve_dir", "expected"), [(None, "/etc/ktinfra/serve"), ("/srv/lab/serve", "/srv/lab/serve")]
)
def test_the_hand_over_goes_where_kt_serve_looks(tmp_path, serve_dir, expected):
    """kt_serve reads the <instance>--<run>.lora.json records from kt_serve_config_dir; before, kt_train wrote
    them to its own /etc/ktinfra/serve, so a moved kt_serve_config_dir never saw a trained adapter."""
    out = tmp_path / "dir.txt"
    tasks = [
        {"ansible.builtin.include_vars": str(REPO / "roles" / "kt_train" / "defaults" / "main.yml")},
        {"ansible.builtin.copy": {"content": "{{ kt_train_serve_config_dir }}", "dest": str(out)}},
    ]
    rc, output = run_play(tmp_path, tasks, {"kt_serve_config_dir": serve_dir} if serve_dir else {})
    assert rc == 0, output[-3000:]
    assert out.read_text() == expected
