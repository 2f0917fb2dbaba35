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
# What the planner says of MODEL on each capture: () where the plan is feasible, else a piece of each of its
# problems in order (a capture added to tests/fixtures/hosts needs its entry). The real AMX + GPU hosts (H100,
# H200, 2x H200) serve it; only the 2x H200 has the disk to fine-tune it, so the single-GPU ones fine-tune the
# smaller DeepSeek-V2-Lite below instead.
SERVE_PROBLEMS = {
    "2xh200-cvd1-xeon-amx-32c": (),
    "2xh200-xeon-amx-32c": (),
    "4xh200-xeon-amx-64c": (),
    "epyc-2c-nogpu": ("no NVIDIA GPU found",),
    "h100-xeon-amx-16c": (),
    "h200-xeon-amx-16c": (),
    "synthetic-2s-8470q-amx": (),
    "synthetic-2s-8470q-unbalanced": (),
    "synthetic-4x5090-8470q": (),
    "synthetic-autodl-6430-4090": (),
    "synthetic-autodl-8352v-4090": ("/root/autodl-tmp has 32.2 GB free", "glibc 2.31 is older than 2.35"),
    "synthetic-h100-mig-2x3g": (),
    "synthetic-h100-mig-none": ("has MIG enabled without MIG instances",),
}
SHORT_OF_DISK = ("needs 83.3 GB disk (61.1 GB download + 22.3 GB outputs), / has 68.7 GB free",)
SFT_PROBLEMS = {  # the same for both stacks
    "2xh200-cvd1-xeon-amx-32c": (),
    "2xh200-xeon-amx-32c": (),
    "4xh200-xeon-amx-64c": (),
    "epyc-2c-nogpu": ("no NVIDIA GPU found", "KT fine-tuning needs AMX", "needs 67.6 GB RAM"),
    "h100-xeon-amx-16c": SHORT_OF_DISK,
    "h200-xeon-amx-16c": SHORT_OF_DISK,
    "synthetic-2s-8470q-amx": ("older than 5.16: AMX tiles need ARCH_REQ_XCOMP_PERM",),
    "synthetic-2s-8470q-unbalanced": (),
    "synthetic-4x5090-8470q": (),
    "synthetic-autodl-6430-4090": (),
    "synthetic-autodl-8352v-4090": (
        "KT fine-tuning needs AMX",
        "/root/autodl-tmp has 32.2 GB free",
        "glibc 2.31 is older than 2.35",
    ),
    "synthetic-h100-mig-2x3g": SHORT_OF_DISK,
    "synthetic-h100-mig-none": ("has MIG enabled without MIG instances", SHORT_OF_DISK[0]),
}
SFT_CASES = [(capture, MODEL, SFT_PROBLEMS[capture]) for capture in CAPTURES] + [
    ("h100-xeon-amx-16c", "DeepSeek-V2-Lite", ()),
    ("h200-xeon-amx-16c", "DeepSeek-V2-Lite", ()),
]
SFT_IDS = [f"{capture}-{model}" for capture, model, _ in SFT_CASES]


def _plan(capture: str, mode: str, model: str = MODEL, **options) -> dict:
    return planner.plan(facts.from_capture(HOSTS / capture), model, mode, **options)


def assert_feasibility(plan: dict, problems: tuple[str, ...]) -> None:
    assert plan["feasible"] == (not problems), plan["problems"]
    assert len(plan["problems"]) == len(problems), plan["problems"]
    for got, expected in zip(plan["problems"], problems, strict=True):
        assert expected in got, plan["problems"]


@pytest.fixture(scope="module")
def systemd_root(tmp_path_factory):
    return make_systemd_root(tmp_path_factory.mktemp("sysroot"))


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_feasible_serve_plan_renders_a_verified_unit(capture, tmp_path, systemd_root):
    plan = _plan(capture, "serve")
    assert_feasibility(plan, SERVE_PROBLEMS[capture])
    if not plan["feasible"]:
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
    plan["serve"]["kt_cpu_variant"] = "avx512"  # kt-kernel v0.4.4's name: 0.7.2 would detect amx itself
    with pytest.raises(RenderError, match="serve.kt_cpu_variant must be one of amx, avx512_bf16"):
        render_serve(plan, name="q30", model_path="/models/q30")
    legacy = _plan("synthetic-2s-8470q-amx", "serve", stack="kt-0.4-autodl")
    assert legacy["feasible"] and legacy["serve"]["kt_cpu_variant"] == "avx512"
    env = render_serve(legacy, name="q30", model_path="/models/q30", weight_path="/models/q30-gguf").files[
        "ktinfra-serve-q30.env"
    ][0]
    assert 'KT_KERNEL_CPU_VARIANT="avx512"' in env.splitlines()
    legacy["serve"]["kt_cpu_variant"] = "avx512_bf16"  # 0.7.2's name: v0.4.4 would detect amx itself
    with pytest.raises(RenderError, match="must be one of amx, avx512, avx2 or null for the legacy"):
        render_serve(legacy, name="q30", model_path="/models/q30", weight_path="/models/q30-gguf")


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
@pytest.mark.parametrize(("capture", "model", "problems"), SFT_CASES, ids=SFT_IDS)
def test_every_feasible_sft_plan_renders_a_recipe(capture, model, problems, stack):
    plan = _plan(capture, "sft", model, stack=stack)
    assert_feasibility(plan, problems)
    if not plan["feasible"]:
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
