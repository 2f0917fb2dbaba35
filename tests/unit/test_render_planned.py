"""The renderer on the real planner's output for every host capture (real and synthetic)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from test_render_serve import SEED002_LINE, flag_values
from test_render_support import install_executables, make_systemd_root, unit_executables, verify_unit

from ktinfra import facts, planner
from ktinfra.render import RenderError, render_serve, write_bundle
from ktinfra.render.train import render_train

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
CAPTURES = sorted(p.name for p in HOSTS.iterdir() if p.is_dir())
MODEL = "Qwen3-30B-A3B"


def _plan(capture: str, mode: str, **options) -> dict:
    return planner.plan(facts.from_capture(HOSTS / capture), MODEL, mode, **options)


@pytest.fixture(scope="module")
def systemd_root(tmp_path_factory):
    return make_systemd_root(tmp_path_factory.mktemp("sysroot"))


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_feasible_serve_plan_renders_a_verified_unit(capture, tmp_path, systemd_root):
    plan = _plan(capture, "serve")
    if not plan["feasible"]:
        assert plan["problems"], "an infeasible plan must say why"
        return
    rendered = render_serve(plan, name="q30", model_path="/models/q30", weight_path="/models/q30-cpu")
    values = flag_values(rendered.info["argv"])
    serve = plan["serve"]
    assert values["--kt-method"] == serve["kt_method"]
    assert values["--kt-cpuinfer"] == str(serve["kt_cpuinfer"])
    assert values["--kt-threadpool-count"] == str(serve["kt_threadpool_count"])
    assert values["--kt-num-gpu-experts"] == str(serve["kt_num_gpu_experts"])
    assert values["--mem-fraction-static"] == format(serve["mem_fraction_static"], "g")
    if plan["host"]["numa_nodes"] > 1 and plan["host"].get("container") is False and not serve["numa_cpus"]:
        assert rendered.info["numactl_args"] == ["--interleave=all"]
    write_bundle(tmp_path, rendered)
    unit = tmp_path / "ktinfra-serve@.service"
    install_executables(systemd_root, unit_executables(unit.read_text()))
    result = verify_unit(systemd_root, unit, "q30")
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_a_forced_kt_kernel_library_reaches_the_environment_file():
    """AMX flags on kernel 5.15: kt-kernel would load its amx library from the flags; the env file pins it."""
    plan = _plan("synthetic-2s-8470q-amx", "serve")
    assert plan["feasible"] and plan["serve"]["kt_cpu_variant"] == "avx512_bf16"
    rendered = render_serve(plan, name="q30", model_path="/models/q30")
    env = rendered.files["ktinfra-serve-q30.env"][0].splitlines()
    assert 'KT_KERNEL_CPU_VARIANT="avx512_bf16"' in env
    other = render_serve(_plan("h100-xeon-amx-16c", "serve"), name="q30", model_path="/models/q30")
    assert "KT_KERNEL_CPU_VARIANT" not in other.files["ktinfra-serve-q30.env"][0]
    plan["serve"]["kt_cpu_variant"] = "avx512"
    with pytest.raises(RenderError, match="serve.kt_cpu_variant must be one of amx, avx512_bf16"):
        render_serve(plan, name="q30", model_path="/models/q30")


def test_seed002_host_plan_renders_the_seeds_hardware_decisions():
    """Planner + renderer on the seed 002 host shape give the hand-tuned line's host-bound values."""
    argv = render_serve(
        _plan("synthetic-autodl-6430-4090", "serve"), name="Qwen3-30B-A3B", model_path="/m", weight_path="/w"
    ).info["argv"]
    ours, seed = flag_values(argv), flag_values(shlex.split(SEED002_LINE))
    for flag in (
        "--kt-method",
        "--kt-cpuinfer",
        "--kt-threadpool-count",
        "--kt-max-deferred-experts-per-token",
        "--mem-fraction-static",
        "--chunked-prefill-size",
        "--served-model-name",
        "--trust-remote-code",
        "--enable-mixed-chunk",
    ):
        assert ours[flag] == seed[flag], flag


@pytest.mark.parametrize("stack", ["kt-0.7", "kt-0.4-autodl"])
@pytest.mark.parametrize("capture", CAPTURES)
def test_every_feasible_sft_plan_renders_a_recipe(capture, stack):
    plan = _plan(capture, "sft", stack=stack)
    if not plan["feasible"]:
        assert plan["problems"]
        return
    rendered = render_train(
        plan, name="r1", model_path="/m/q30", dataset="identity", dataset_dir="/data", output_dir="/runs/r1"
    )
    recipe = yaml.safe_load(rendered.files["r1.yaml"][0])
    kt = plan["sft"]["kt"]
    if plan["stack_generation"] == "current":
        assert recipe["kt_config"] == kt["kt_config"]
        accelerate = yaml.safe_load(rendered.files["r1.accelerate.yaml"][0])
        assert accelerate["num_processes"] == plan["sft"]["launcher"]["num_processes"]
    else:
        assert recipe["cpu_infer"] == kt["cpu_infer"]
        assert recipe["kt_optimize_rule"].endswith(kt["kt_optimize_rule"])
    assert recipe["template"] == plan["sft"]["template"]
    assert recipe["per_device_train_batch_size"] == plan["sft"]["per_device_train_batch_size"]
