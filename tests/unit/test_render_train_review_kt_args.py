"""render train: the typed KT arguments of the plan and the legacy warmup_steps, as upstream reads them.

HfArgumentParser.parse_dict builds KTransformersArguments without converting a value, and kt-kernel's
sft/wrapper.py reads `bool(kt_use_lora_experts)` and `kt_lora_expert_num or 2`: a plan's string "false"
turned LoRA experts on, 0 became 2. transformers 4.56 (the legacy sft env) raises "warmup_steps must be of
type int" for a float warmup_steps, which transformers 5 (current stack) reads as a ratio below 1.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError
from ktinfra.render.train import render_train

CURRENT = "h100-qwen3-30b-a3b-sft-current.json"
LEGACY = "seed002-qwen3-30b-a3b-sft-legacy.json"
ARGS = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}


def _recipe(plan: dict) -> dict:
    return yaml.safe_load(render_train(plan, **ARGS).files["r.yaml"][0])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("kt_use_lora_experts", "false", "sft.kt.kt_use_lora_experts must be true or false, got 'false'"),
        ("kt_use_lora_experts", 1, "sft.kt.kt_use_lora_experts must be true or false, got 1"),
        ("kt_use_lora_experts", {}, "sft.kt.kt_use_lora_experts must be true or false"),
        ("kt_lora_expert_num", 0, r"sft.kt.kt_lora_expert_num must be an integer >= 1, got 0"),
        ("kt_lora_expert_num", True, r"sft.kt.kt_lora_expert_num must be an integer >= 1, got True"),
        ("kt_lora_expert_num", "2", r"sft.kt.kt_lora_expert_num must be an integer >= 1"),
        ("kt_lora_expert_intermediate_size", 1.5, "kt_lora_expert_intermediate_size must be an integer"),
        ("kt_lora_expert_intermediate_size", -1, "kt_lora_expert_intermediate_size must be an integer"),
    ],
)
def test_current_kt_arguments_of_the_wrong_kind_are_refused(key, value, message):
    plan = load_fixture_plan(CURRENT)
    plan["sft"]["kt"][key] = value
    with pytest.raises(RenderError, match=message):
        render_train(plan, **ARGS)


def test_current_kt_arguments_of_the_right_kind_reach_the_recipe():
    plan = load_fixture_plan(CURRENT)
    plan["sft"]["kt"].update(
        kt_use_lora_experts=True, kt_lora_expert_num=4, kt_lora_expert_intermediate_size=512
    )
    recipe = _recipe(plan)
    assert (recipe["kt_use_lora_experts"], recipe["kt_lora_expert_num"]) == (True, 4)
    assert recipe["kt_lora_expert_intermediate_size"] == 512
    plan["sft"]["kt"]["kt_use_lora_experts"] = False
    assert _recipe(plan)["kt_use_lora_experts"] is False


@pytest.mark.parametrize(
    ("key", "value"), [("kt_use_cuda_graph", "no"), ("kt_force_think", 0), ("kt_maxlen", 0)]
)
def test_legacy_kt_arguments_of_the_wrong_kind_are_refused(key, value):
    plan = load_fixture_plan(LEGACY)
    plan["sft"]["kt"][key] = value
    with pytest.raises(RenderError, match=f"sft.kt.{key} must be"):
        render_train(plan, **ARGS)


@pytest.mark.parametrize("steps", [0.1, 1.5])
def test_legacy_float_warmup_steps_are_refused(steps):
    plan = load_fixture_plan(LEGACY)
    plan["sft"]["warmup_steps"] = steps
    with pytest.raises(RenderError, match=f"whole number of steps on the legacy stack.*got {steps}"):
        render_train(plan, **ARGS)


def test_warmup_steps_each_stack_takes():
    legacy = load_fixture_plan(LEGACY)
    legacy["sft"]["warmup_steps"] = 20
    recipe = _recipe(legacy)
    assert recipe["warmup_steps"] == 20 and "warmup_ratio" not in recipe
    current = load_fixture_plan(CURRENT)
    current["sft"]["warmup_steps"] = 0.05  # transformers 5: a ratio
    assert _recipe(current)["warmup_steps"] == 0.05


def test_the_cli_refuses_before_writing(tmp_path):
    plan = load_fixture_plan(CURRENT)
    plan["sft"]["kt"]["kt_use_lora_experts"] = "false"
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "ktinfra", "render", "train", "--plan", str(plan_file), "--name", "r",
         "--model-path", "/m", "--dataset", "d", "--dataset-dir", "/d", "--output-dir", "/o",
         "--out", str(out)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "sft.kt.kt_use_lora_experts must be true or false, got 'false'" in proc.stderr
    assert not out.exists()


RAWINT4 = {"kt_share_backward_bb": False, "kt_force_fused_expert_lora": True}  # what RAWINT4 trains with


# kt-kernel 0.7.2 sft/wrapper.py, while the model is wrapped: "activation_policy.cpu=retain requires CPU-only
# AMXBF16 Full/LoRA or frozen-base INT8/FP8/RAWINT4/MXFP4 LoRA; Hybrid, GPU-expert, LoRA-expert, generic INT4,
# and SkipLoRA paths are not supported"; llamafactory-kt retains CPU activations when kt_cpu_activation says
# so, or without GPU gradient checkpointing.
@pytest.mark.parametrize(
    ("change", "weight_path", "message"),
    [
        ({"kt": {"kt_cpu_activation": "retain"}}, "/w/Q-INT4", "retain does not go with kt_backend AMXINT4"),
        ({"disable_gradient_checkpointing": True}, "/w/Q-INT4", "disable_gradient_checkpointing: true"),
        ({"kt": {"kt_cpu_activation": "retain"}, "kt_config": {"kt_num_gpu_experts": 2}}, None,
         "kt_num_gpu_experts other than 0"),
        ({"disable_gradient_checkpointing": True, "kt_config": {"kt_num_gpu_experts": 2}}, None,
         "kt_num_gpu_experts other than 0"),
        ({"kt": {"kt_cpu_activation": "retain", "kt_use_lora_experts": True}}, None, "kt_use_lora_experts"),
        ({"kt": {"kt_cpu_activation": "retain"},  # no format: kt-kernel pairs none with SkipLoRA
          "kt_config": {"kt_backend": "AMXBF16_SkipLoRA", "kt_expert_weight_format": None}}, None,
         "retain does not go with kt_backend AMXBF16_SkipLoRA"),
        ({"kt": {"kt_cpu_activation": "retain"},
          "kt_config": {"kt_backend": "RAWINT4", "kt_expert_weight_format": "rawint4", **RAWINT4}}, None,
         "rawint4 experts with GPU gradient checkpointing"),
    ],
)  # fmt: skip
def test_cpu_retain_where_kt_kernel_refuses_it_is_refused(change, weight_path, message):
    plan = load_fixture_plan(CURRENT)
    sft = plan["sft"]
    sft["kt"].update(change.get("kt", {}))
    sft["kt"]["kt_config"].update(change.get("kt_config", {}))
    sft["kt"]["kt_config"] = {k: v for k, v in sft["kt"]["kt_config"].items() if v is not None}
    sft.update({k: v for k, v in change.items() if k not in ("kt", "kt_config")})
    with pytest.raises(RenderError, match=message):
        render_train(plan, **ARGS, weight_path=weight_path)


def test_cpu_retain_where_kt_kernel_takes_it_renders():
    plan = load_fixture_plan(CURRENT)
    plan["sft"]["kt"]["kt_cpu_activation"] = "retain"  # the upstream docs' BF16 recipe
    assert _recipe(plan)["kt_cpu_activation"] == "retain"
    int4 = load_fixture_plan(CURRENT)  # AMXINT4 with the default recompute
    assert _recipe_with(int4, weight_path="/w/Q-INT4")["kt_config"]["kt_backend"] == "AMXINT4"
    gpu_experts = load_fixture_plan(CURRENT)
    gpu_experts["sft"]["kt"]["kt_config"]["kt_num_gpu_experts"] = 2
    assert _recipe(gpu_experts)["kt_config"]["kt_num_gpu_experts"] == 2
    raw = load_fixture_plan(CURRENT)  # RAWINT4 retains with GPU retain too
    raw["sft"]["disable_gradient_checkpointing"] = True
    raw["sft"]["kt"]["kt_config"].update(kt_backend="RAWINT4", kt_expert_weight_format="rawint4", **RAWINT4)
    assert _recipe(raw)["disable_gradient_checkpointing"] is True


def _recipe_with(plan: dict, **extra) -> dict:
    return yaml.safe_load(render_train(plan, **ARGS, **extra).files["r.yaml"][0])
