"""The kt-kernel library a legacy-stack plan forces is named as kt-kernel v0.4.4 reads it (review 6)."""

from pathlib import Path

import pytest

from ktinfra import facts, planner
from ktinfra.plan.formats import forced_cpu_variant
from ktinfra.render import RenderError, render_serve

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
AMX_ON_515 = "synthetic-2s-8470q-amx"  # AMX flags, kernel 5.15: no tiles granted


def _legacy_plan() -> dict:
    return planner.plan(
        facts.from_capture(HOSTS / AMX_ON_515), "Qwen3-30B-A3B", "serve", stack="kt-0.4-autodl"
    )


def test_legacy_plan_names_a_variant_kt_kernel_v044_accepts():
    """v0.4.4's _cpu_detect.py takes amx, avx512 or avx2 and ignores any other value (it then picks amx
    from the flags): before, the legacy plan said avx512_bf16, 0.7.2's name."""
    result = _legacy_plan()
    assert result["feasible"] and result["stack_generation"] == "legacy"
    variant = result["serve"]["kt_cpu_variant"]
    assert variant in ("amx", "avx512", "avx2") and variant == "avx512"
    why = result["reasons"]["kt_cpu_variant"]
    assert why.startswith("avx512: ") and "KT_KERNEL_CPU_VARIANT=avx512 " in why
    # what really happens: the legacy stack's one library, built here with AMX, loads whatever it says
    assert "loads whatever the variable says" in why and "LLAMAFILE, this plan's CPU method" in why


def test_legacy_variant_falls_back_to_avx2_without_avx512f():
    host = facts.from_capture(HOSTS / AMX_ON_515)
    host["cpu"]["isa"].update({flag: False for flag in host["cpu"]["isa"] if flag.startswith("avx512")})
    assert forced_cpu_variant(host, legacy=True)[0] == "avx2"
    assert forced_cpu_variant(host)[0] == "avx2"


def test_render_takes_the_legacy_name_for_a_legacy_plan_only():
    legacy = _legacy_plan()
    env = render_serve(legacy, name="q30", model_path="/models/q30", weight_path="/models/q30-gguf").files[
        "ktinfra-serve-q30.env"
    ][0]
    assert 'KT_KERNEL_CPU_VARIANT="avx512"' in env.splitlines()
    legacy["serve"]["kt_cpu_variant"] = "avx512_bf16"
    with pytest.raises(
        RenderError, match=r"amx, avx512, avx2 or null for the legacy stack's kt-kernel v0\.4\.4"
    ):
        render_serve(legacy, name="q30", model_path="/models/q30", weight_path="/models/q30-gguf")
    current = planner.plan(facts.from_capture(HOSTS / AMX_ON_515), "Qwen3-30B-A3B", "serve")
    assert current["serve"]["kt_cpu_variant"] == "avx512_bf16"
    current["serve"]["kt_cpu_variant"] = "avx512"
    with pytest.raises(RenderError, match="for the current stack's kt-kernel 0.7.2"):
        render_serve(current, name="q30", model_path="/models/q30")
