"""Render hardening: '%' reaches systemd literally, --user is checked, write_bundle keeps DIR whole on any
failure, contradictory plans are refused, and unreadable plan files fail with a one-line error."""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path

import pytest
from test_render_support import PLANS, install_executables, make_systemd_root, verify_unit
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.render import RenderError, load_plan, render_serve, sglang_argv, write_bundle
from ktinfra.render.convert import render_convert, render_lora_convert
from ktinfra.render.train import render_train

SEED002 = PLANS / "seed002-qwen3-30b-a3b-serve.json"
SFT_CURRENT = PLANS / "h100-qwen3-30b-a3b-sft-current.json"
SFT_LEGACY = PLANS / "seed002-qwen3-30b-a3b-sft-legacy.json"
SERVE = ["render", "serve", "--name", "qwen3", "--model-path", "/m", "--weight-path", "/w"]
TRAIN = {"model_path": "/m/q", "dataset": "d", "dataset_dir": "/data", "output_dir": "/runs/r1"}
CONVERT = {"model_path": "/m/q", "output": "/m/q-int8", "method": "int8", "cpuinfer_threads": 8}
CONVERT["threadpool_count"] = 2


@pytest.fixture
def seed002():
    return json.loads(SEED002.read_text())


@pytest.fixture(scope="module")
def systemd_root(tmp_path_factory):
    return make_systemd_root(tmp_path_factory.mktemp("sysroot"))


def run(args):
    return CliRunner().invoke(app, [str(a) for a in args])


def assert_one_line_error(result, message):
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
    assert message in result.output


def tree(directory: Path) -> dict[str, tuple]:
    """Every entry under directory (directories, links, hidden temp files) with its kind, content and mode."""
    if not directory.exists():
        return {}
    entries = {}
    for path in sorted(directory.rglob("*")):
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            entries[str(path.relative_to(directory))] = ("link", os.readlink(path))
        elif stat.S_ISREG(info.st_mode):
            entries[str(path.relative_to(directory))] = ("file", path.read_bytes(), info.st_mode & 0o7777)
        else:
            entries[str(path.relative_to(directory))] = (stat.S_IFMT(info.st_mode), info.st_mode & 0o7777)
    return entries


def _verify_with_literal_programs(root: Path, unit_path: Path, instance: str, programs: list[str]):
    """verify passes only when systemd resolves each program path exactly as given (no %-expansion)."""
    install_executables(root, programs)
    result = verify_unit(root, unit_path, instance)
    assert result.returncode == 0, result.stderr
    return result


# 1. '%' in values written into unit files


def test_percent_in_serve_python_is_escaped_in_the_unit_only(seed002, tmp_path):
    rendered = render_serve(
        seed002, name="qwen3", model_path="/m%n/q", weight_path="/w%i", python="/opt/kt%i/bin/python"
    )
    unit = rendered.files["ktinfra-serve@.service"][0]
    env = rendered.files["ktinfra-serve-qwen3.env"][0]
    assert "ExecStart=/usr/bin/numactl $KT_NUMACTL_ARGS /opt/kt%%i/bin/python -c " in unit
    assert "ExecStartPost=/opt/kt%%i/bin/python -c " in unit
    assert "/opt/kt%i/" not in unit.replace("%%", "")
    # EnvironmentFile values are not specifier-expanded: written as they are
    assert "--model /m%n/q" in env and "--kt-weight-path /w%i" in env and "%%" not in env
    # the JSON shows what systemd will run
    assert rendered.info["argv"][0] == "/opt/kt%i/bin/python"
    assert rendered.info["exec_argv"][:2] == ["/usr/bin/numactl", "/opt/kt%i/bin/python"]


def test_percent_in_serve_python_reaches_systemd_literally(seed002, systemd_root, tmp_path):
    rendered = render_serve(
        seed002, name="qwen3", model_path="/m", weight_path="/w", python="/opt/kt%i/bin/python"
    )
    write_bundle(tmp_path, rendered)
    _verify_with_literal_programs(
        systemd_root,
        tmp_path / "ktinfra-serve@.service",
        "qwen3",
        ["/usr/bin/numactl", "/opt/kt%i/bin/python"],
    )


def test_percent_in_convert_python_and_script_reach_systemd_literally(systemd_root, tmp_path):
    rendered = render_convert(**CONVERT, python="/opt/py%n/bin/python", script="/opt/s%i/convert.py")
    unit = rendered.files["ktinfra-convert@.service"][0]
    assert "ExecStart=/opt/py%%n/bin/python /opt/s%%i/convert.py $KT_CONVERT_ARGS" in unit
    assert rendered.info["argv"][:2] == ["/opt/py%n/bin/python", "/opt/s%i/convert.py"]
    write_bundle(tmp_path, rendered)
    _verify_with_literal_programs(
        systemd_root, tmp_path / "ktinfra-convert@.service", "q-int8", ["/opt/py%n/bin/python"]
    )


@pytest.mark.parametrize("legacy", [False, True])
def test_percent_in_lora_convert_script_reaches_systemd_literally(systemd_root, tmp_path, legacy):
    kwargs = {} if legacy else {"model_path": "/m/q"}
    rendered = render_lora_convert(
        adapter="/runs/r1", output="/srv/lora/r1", legacy=legacy, python="/opt/p%p/python",
        script="/opt/s%u/conv%i.py", **kwargs,
    )  # fmt: skip
    unit = rendered.files["ktinfra-lora-convert@.service"][0]
    assert "ExecStart=/opt/p%%p/python /opt/s%%u/conv%%i.py $KT_LORA_CONVERT_ARGS" in unit
    assert "Description=KTransformers LoRA adapter conversion for SGLang %i (conv%%i.py)" in unit
    write_bundle(tmp_path, rendered)
    _verify_with_literal_programs(
        systemd_root, tmp_path / "ktinfra-lora-convert@.service", "r1", ["/opt/p%p/python"]
    )


@pytest.mark.parametrize("fixture", [SFT_CURRENT, SFT_LEGACY])
def test_percent_in_train_python_reaches_systemd_literally(systemd_root, tmp_path, fixture):
    plan = json.loads(fixture.read_text())
    rendered = render_train(plan, name="r1", python="/opt/kt%i/bin/python", **TRAIN)
    unit = rendered.files["ktinfra-train@.service"][0]
    assert "ExecStart=/opt/kt%%i/bin/" in unit
    assert "WorkingDirectory=/var/lib/ktinfra/train/%i\n" in unit  # the intended specifier stays
    assert rendered.info["argv"][0].startswith("/opt/kt%i/bin/")
    write_bundle(tmp_path, rendered)
    _verify_with_literal_programs(
        systemd_root, tmp_path / "ktinfra-train@.service", "r1", [rendered.info["argv"][0]]
    )


def test_percent_python_on_the_command_line_is_escaped(tmp_path):
    out = tmp_path / "out"
    result = run([*SERVE, "--plan", SEED002, "--python", "/opt/kt%i/bin/python", "--out", out, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["argv"][0] == "/opt/kt%i/bin/python"
    assert "/opt/kt%%i/bin/python" in (out / "ktinfra-serve@.service").read_text()


# 2. --user


BAD_USERS = ["99999999999", "4294967295", "65535", "bad;user", "kt%n", "", "-x", ".x", "007", "a b",
             "ktinfra\n", "a" * 33, "ab$", "us\u00e9r"]  # fmt: skip
GOOD_USERS = ["ktinfra", "_svc", "a.b-c_d", "0", "1000", "4294967294", "a" * 32]


def _render_each(user):
    plan = json.loads(SEED002.read_text())
    yield lambda: render_serve(plan, name="q", model_path="/m", weight_path="/w", user=user)
    yield lambda: render_convert(**CONVERT, user=user)
    yield lambda: render_lora_convert(adapter="/runs/r1", output="/srv/lora/r1", legacy=True, user=user)
    yield lambda: render_train(json.loads(SFT_CURRENT.read_text()), name="r1", user=user, **TRAIN)


@pytest.mark.parametrize("user", BAD_USERS)
def test_bad_users_are_refused_by_every_renderer(user):
    for render in _render_each(user):
        with pytest.raises(RenderError, match="--user"):
            render()


@pytest.mark.parametrize("user", GOOD_USERS)
def test_user_names_and_uids_are_written_as_given(user):
    for render in _render_each(user):
        unit = next(content for name, (content, _) in render().files.items() if name.endswith(".service"))
        assert f"\nUser={user}\n" in unit


@pytest.mark.parametrize("user", ["99999999999", "bad;user", "kt%n"])
def test_bad_user_on_the_command_line_is_a_one_line_error(tmp_path, user):
    out = tmp_path / "out"
    result = run([*SERVE, "--plan", SEED002, "--user", user, "--out", out])
    assert_one_line_error(result, "--user")
    assert not out.exists()


# 3. write_bundle keeps DIR as it was


@pytest.fixture
def earlier_render(tmp_path):
    """A --out holding an earlier render of both files (the env file 0600)."""
    out = tmp_path / "rd"
    out.mkdir()
    (out / "ktinfra-serve@.service").write_text("# earlier unit\n")
    env = out / "ktinfra-serve-qwen3.env"
    env.write_text('KT_SERVE_ARGS="--port 1"\n')
    env.chmod(0o600)
    return out


def test_directory_in_the_way_fails_cleanly_before_anything_is_replaced(tmp_path):
    out = tmp_path / "rd"
    (out / "ktinfra-serve-qwen3.env").mkdir(parents=True)
    (out / "ktinfra-serve@.service").write_text("old\n")
    before = tree(out)
    result = run([*SERVE, "--plan", SEED002, "--out", out, "--json"])
    assert_one_line_error(result, "ktinfra-serve-qwen3.env: a directory is in the way")
    assert tree(out) == before


def test_fifo_in_the_way_is_refused(seed002, earlier_render):
    (earlier_render / "ktinfra-serve-qwen3.env").unlink()
    os.mkfifo(earlier_render / "ktinfra-serve-qwen3.env")
    before = tree(earlier_render)
    rendered = render_serve(seed002, name="qwen3", model_path="/m", weight_path="/w")
    with pytest.raises(RenderError, match="not a regular file"):
        write_bundle(earlier_render, rendered)
    assert tree(earlier_render) == before


def _fail_replace_into(monkeypatch, target_name):
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if str(src).endswith(".tmp") and Path(dst).name == target_name:
            raise PermissionError(13, "Permission denied", str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("keep", ["both", "unit-only", "none"])
def test_a_rename_failing_midway_restores_the_replaced_files(seed002, earlier_render, monkeypatch, keep):
    if keep in ("unit-only", "none"):
        (earlier_render / "ktinfra-serve-qwen3.env").unlink()
    if keep == "none":
        (earlier_render / "ktinfra-serve@.service").unlink()
    before = tree(earlier_render)
    rendered = render_serve(seed002, name="qwen3", model_path="/m", weight_path="/w")
    assert list(rendered.files)[-1] == "ktinfra-serve-qwen3.env"  # the unit is renamed first
    _fail_replace_into(monkeypatch, "ktinfra-serve-qwen3.env")
    with pytest.raises(RenderError, match=r"cannot write .*ktinfra-serve-qwen3\.env: Permission denied"):
        write_bundle(earlier_render, rendered)
    assert tree(earlier_render) == before  # old unit back, no new files, no temp files or backups


def test_a_failed_write_removes_the_directories_it_created(seed002, tmp_path, monkeypatch):
    rendered = render_serve(seed002, name="qwen3", model_path="/m", weight_path="/w")
    _fail_replace_into(monkeypatch, "ktinfra-serve-qwen3.env")
    with pytest.raises(RenderError):
        write_bundle(tmp_path / "new" / "out", rendered)
    assert list(tmp_path.iterdir()) == []


def test_successful_write_leaves_no_backups_and_keeps_modes(seed002, earlier_render):
    rendered = render_serve(seed002, name="qwen3", model_path="/m", weight_path="/w")
    write_bundle(earlier_render, rendered)
    assert sorted(p.name for p in earlier_render.iterdir()) == [
        "ktinfra-serve-qwen3.env",
        "ktinfra-serve@.service",
    ]
    assert (earlier_render / "ktinfra-serve-qwen3.env").stat().st_mode & 0o777 == 0o600
    assert (earlier_render / "ktinfra-serve@.service").read_text() == rendered.files[
        "ktinfra-serve@.service"
    ][0]


def test_non_utf8_argument_is_refused_before_writing(seed002, tmp_path):
    with pytest.raises(RenderError, match="not valid UTF-8"):
        render_serve(seed002, name="q", model_path="/m", weight_path="/w", python="/opt/\udcff/python")
    bundle = render_serve(seed002, name="q", model_path="/m", weight_path="/w")
    bundle.add("broken.yaml", "a: \udcff\n")
    with pytest.raises(RenderError, match="not UTF-8"):
        write_bundle(tmp_path / "out", bundle)
    assert not (tmp_path / "out").exists()


def test_instance_name_with_a_trailing_newline_is_refused(seed002):
    with pytest.raises(RenderError, match="--name"):
        render_serve(seed002, name="q\n", model_path="/m", weight_path="/w")


# 4. contradictory plans


def _drop(key):
    return lambda plan: plan.pop(key)


def _set(*path_value):
    *path, value = path_value

    def change(plan):
        target = plan
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


LORA = {"paths": {"a": "/srv/lora/a"}, "max_loras_per_batch": 1, "backend": "triton"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_drop("schema"), "plan has no schema key"),
        (_set("schema", 2), "plan has schema 2"),
        (_set("schema", "1"), "plan has schema '1'"),
        (_set("schema", True), "plan has schema True"),
        (_drop("feasible"), "plan has no feasible key"),
        (_set("feasible", "true"), "feasible must be true or false, got 'true'"),
        (_set("feasible", "false"), "feasible must be true or false, got 'false'"),
        (_set("feasible", 0), "feasible must be true or false, got 0"),
        (_set("feasible", 1), "feasible must be true or false, got 1"),
        (_set("feasible", None), "feasible must be true or false, got None"),
        (
            _set("serve", "tensor_parallel_size", 2),
            "tensor_parallel_size 2 does not match serve.gpu_indices [0]",
        ),
        (_set("serve", "gpu_indices", [0, 0]), "lists GPU 0 more than once"),
        (_set("serve", "gpu_indices", [-1]), "must be a list of GPU indices"),
        (_set("serve", "gpu_indices", [True]), "must be a list of GPU indices"),
        (_set("serve", "kt_threadpool_count", 9), "kt_threadpool_count 9 exceeds serve.kt_cpuinfer 8"),
        (_set("serve", "lora", dict(LORA)), "kt_num_gpu_experts is 31"),
        (_set("serve", "kt_num_gpu_experts", 129), "kt_num_gpu_experts 129 exceeds model.num_experts 128"),
        (_set("serve", "lora", "yes"), "serve.lora must be an object"),
        (_set("host", "numa_nodes", "x"), "host.numa_nodes must be an integer >= 0, got 'x'"),
        (_set("host", "numa_nodes", "2"), "host.numa_nodes must be an integer >= 0, got '2'"),
        (_set("host", ["x"]), "plan host must be an object"),
        (_set("model", "x"), "plan model must be an object"),
    ],
)
def test_contradictory_serve_plans_are_refused(seed002, change, message):
    seed002["serve"]["gpu_indices"] = [0]
    change(seed002)
    with pytest.raises(RenderError) as caught:
        render_serve(seed002, name="q", model_path="/m", weight_path="/w")
    assert message in str(caught.value)


@pytest.mark.parametrize("backend", ["bogus", "triton;x", "TRITON", 1])
def test_unknown_lora_backends_are_refused(seed002, backend):
    seed002["serve"].update(kt_num_gpu_experts=0, lora={**LORA, "backend": backend})
    with pytest.raises(RenderError, match="lora.backend .* is not one of triton, csgmv, torch_native"):
        sglang_argv(seed002, model_path="/m", weight_path="/w")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("kt_gpu_prefill_token_threshold", 2048, "kt_gpu_prefill_token_threshold is 2048: sglang-kt refuses"),
        ("max_running_requests", 1, "max_running_requests is 1: sglang-kt serves LoRA with at least 2"),
    ],
)
def test_lora_plans_sglang_kt_would_refuse_at_start_are_refused(seed002, key, value, message):
    """kt_ep_wrapper.py refuses the GPU prefill threshold beside KT LoRA, server_args.py fewer than 2 running
    requests: a plan edited by hand (or composed by a role) must fail here, not at the server's start."""
    seed002["serve"].update({"kt_num_gpu_experts": 0, "lora": dict(LORA), key: value})
    with pytest.raises(RenderError, match=message):
        sglang_argv(seed002, model_path="/m", weight_path="/w")
    seed002["serve"].pop("lora")
    argv = sglang_argv(seed002, model_path="/m", weight_path="/w")  # the same plan without adapters renders
    assert str(value) in argv


@pytest.mark.parametrize("backend", ["triton", "csgmv", "torch_native", None])
def test_lora_plans_without_gpu_experts_render(seed002, backend):
    seed002["serve"].update(kt_num_gpu_experts=0, lora={**LORA, "backend": backend})
    argv = sglang_argv(seed002, model_path="/m", weight_path="/w")
    assert argv[-2:] == ["--lora-backend", backend or "triton"]


@pytest.mark.parametrize("num_experts", [128, None, "128", True, 0])
def test_every_expert_on_the_gpu_renders(seed002, num_experts):
    seed002["model"]["num_experts"] = num_experts
    seed002["serve"]["kt_num_gpu_experts"] = 128
    argv = sglang_argv(seed002, model_path="/m", weight_path="/w")
    assert argv[argv.index("--kt-num-gpu-experts") + 1] == "128"


def test_consistent_gpu_indices_still_render(seed002):
    seed002["host"]["gpus"].append(seed002["host"]["gpus"][0] | {"index": 1})  # a second GPU to list
    seed002["serve"].update(tensor_parallel_size=2, gpu_indices=[1, 0])
    rendered = render_serve(seed002, name="q", model_path="/m", weight_path="/w")
    assert 'CUDA_VISIBLE_DEVICES="1,0"' in rendered.files["ktinfra-serve-q.env"][0]


@pytest.mark.parametrize("feasible", ["true", None, 1])
def test_other_renderers_refuse_plans_that_do_not_say_feasible_true(feasible):
    serve = json.loads(SEED002.read_text())
    serve["feasible"] = feasible
    with pytest.raises(RenderError, match="feasible"):
        render_convert(model_path="/m/q", output="/m/q-int8", plan=serve)
    sft = json.loads(SFT_CURRENT.read_text())
    sft["feasible"] = feasible
    with pytest.raises(RenderError, match="feasible"):
        render_train(sft, name="r1", **TRAIN)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [("physical_cores", "x", "host.physical_cores must be an integer"),
     ("gpus", ["x"], "host.gpus must be a list of GPU objects")],
)  # fmt: skip
def test_train_refuses_malformed_host_blocks(key, value, message):
    sft = json.loads(SFT_CURRENT.read_text())
    sft["sft"].pop("gpu_indices", None)
    sft["host"][key] = value
    with pytest.raises(RenderError, match=message):
        render_train(sft, name="r1", **TRAIN)


def test_train_refuses_a_launcher_env_that_is_no_mapping():
    sft = json.loads(SFT_CURRENT.read_text())
    sft["sft"]["launcher"] = {**(sft["sft"].get("launcher") or {}), "env": "x"}
    with pytest.raises(RenderError, match="launcher.env must map"):
        render_train(sft, name="r1", **TRAIN)


def test_string_numa_nodes_on_the_command_line_is_a_one_line_error(seed002, tmp_path):
    seed002["host"] = {"numa_nodes": "x", "container": False}
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps(seed002))
    out = tmp_path / "out"
    assert_one_line_error(run([*SERVE, "--plan", plan, "--out", out]), "host.numa_nodes")
    assert not out.exists()


# 5. unreadable plan files


def _plan_file(tmp_path, case):
    path = tmp_path / f"{case}.json"
    if case == "latin1":
        path.write_bytes(b'{"schema": 1, "model": {"name": "Qw\xe9n"}}')
    elif case == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif case == "deep-under-a-key":  # json.loads takes it, copy.deepcopy and json.dumps would not
        plan = json.loads(SEED002.read_text())
        plan["notes"] = json.loads("[" * 600 + "]" * 600)
        path.write_text(json.dumps(plan))
    elif case == "huge-int":
        path.write_text('{"schema": ' + "1" * 5000 + "}")
    return path


@pytest.mark.parametrize(
    ("case", "message"),
    [("latin1", "is not UTF-8 text"), ("deep", "nests deeper than"),
     ("deep-under-a-key", "nests deeper than"), ("huge-int", "is not valid JSON")],
)  # fmt: skip
def test_unreadable_plans_fail_with_a_clear_error(tmp_path, case, message):
    with pytest.raises(RenderError, match=message):
        load_plan(_plan_file(tmp_path, case))


@pytest.mark.parametrize("command", ["serve", "convert", "train"])
@pytest.mark.parametrize(("case", "message"), [("latin1", "not UTF-8"), ("deep", "nests deeper")])
def test_unreadable_plans_on_the_command_line_are_one_line_errors(tmp_path, command, case, message):
    plan = _plan_file(tmp_path, case)
    out = tmp_path / "out"
    args = {
        "serve": SERVE,
        "convert": ["render", "convert", "--model-path", "/m/q", "--output", "/m/q-int8"],
        "train": ["render", "train", "--name", "r1", "--model-path", "/m", "--dataset", "d", "--dataset-dir",
                  "/d", "--output-dir", "/o"],
    }[command]  # fmt: skip
    result = run([*args, "--plan", plan, "--out", out])
    assert_one_line_error(result, message)
    assert not out.exists()


def test_oversized_plan_is_refused(tmp_path, monkeypatch):
    from ktinfra.render import plans

    monkeypatch.setattr(plans, "MAX_PLAN_BYTES", 64)
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"schema": 1, "pad": "x" * 100}))
    with pytest.raises(RenderError, match="larger than 64 bytes"):
        load_plan(path)


def test_valid_fixture_plans_still_load_and_render(seed002):
    assert load_plan(SEED002) == seed002
    plain = render_serve(copy.deepcopy(seed002), name="q", model_path="/m", weight_path="/w")
    assert "%%" not in plain.files["ktinfra-serve@.service"][0]


@pytest.mark.parametrize(
    "threads, pools, message",
    [
        (0, 1, "--cpuinfer-threads must be from 1 to 8192, got 0"),
        (4, 0, "--threadpool-count must be from 1 to 8192, got 0"),
        (int("9" * 400), 1, "--cpuinfer-threads must be from 1 to 8192, got 99999999999999999999$"),
        (4, 8, "--threadpool-count 8 is more thread pools than the 4 converter threads"),
    ],
)
def test_converter_thread_counts_that_cannot_run(threads, pools, message):
    with pytest.raises(RenderError, match=message):
        render_convert(
            model_path="/m", output="/o", method="int8", cpuinfer_threads=threads, threadpool_count=pools
        )


@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), 0.0, -2.0])
def test_a_lora_alpha_that_is_no_scale_is_refused(alpha):
    with pytest.raises(RenderError, match="--lora-alpha must be a finite number above 0"):
        render_lora_convert(adapter="/a", output="/o", model_path="/m", lora_alpha=alpha)


@pytest.mark.parametrize("render", [render_convert, render_lora_convert])
def test_an_empty_instance_name_is_refused_not_replaced_by_the_outputs(render):
    kwargs = {"model_path": "/m", "output": "/o", "name": ""}
    kwargs.update({"method": "int8", "cpuinfer_threads": 4, "threadpool_count": 1} if render is render_convert
                  else {"adapter": "/a", "script": "/x/c.py"})  # fmt: skip
    with pytest.raises(RenderError, match="--name is empty"):
        render(**kwargs)
