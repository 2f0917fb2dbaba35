"""render train against what the stacks' upstream code accepts (llamafactory-kt 0.9.6.dev0, transformers-kt
5.6, kt-kernel 0.7.2 sft/; LLaMA-Factory 0.9.4 for the legacy stack)."""

from __future__ import annotations

import pytest
import yaml
from int8_tree import moe_model, write_tree
from test_render_support import load_fixture_plan

from ktinfra import int8_weights
from ktinfra.render import RenderError
from ktinfra.render.train import render_train

CURRENT = "h100-qwen3-30b-a3b-sft-current.json"
LEGACY = "seed002-qwen3-30b-a3b-sft-legacy.json"
ARGS = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}


def _render(plan: dict, **overrides):
    return render_train(plan, **{**ARGS, **overrides})


@pytest.mark.parametrize("plan_name", [CURRENT, LEGACY])
def test_a_plans_fp16_replaces_the_bf16_default(plan_name):
    """transformers' TrainingArguments raises "At most one of fp16 and bf16 can be True" (training_args.py):
    a plan asking for fp16 alone got the default bf16: true beside it, a recipe no run could start."""
    plan = load_fixture_plan(plan_name)
    del plan["sft"]["bf16"]
    plan["sft"]["fp16"] = True
    rendered = _render(plan)
    recipe = yaml.safe_load(rendered.files["r.yaml"][0])
    assert (recipe["fp16"], recipe["bf16"]) == (True, False)
    if plan_name == CURRENT:  # accelerate's config asks for the same precision
        accelerate = yaml.safe_load(rendered.files["r.accelerate.yaml"][0])
        assert accelerate["mixed_precision"] == "fp16"


def test_accelerate_mixed_precision_follows_the_recipe():
    """transformers takes ACCELERATE_MIXED_PRECISION (from the accelerate config) when the recipe sets neither
    fp16 nor bf16: the config must then say "no", not bf16."""
    plan = load_fixture_plan(CURRENT)
    plan["sft"]["bf16"] = False
    rendered = _render(plan)
    recipe = yaml.safe_load(rendered.files["r.yaml"][0])
    assert (recipe.get("fp16", False), recipe["bf16"]) == (False, False)
    assert yaml.safe_load(rendered.files["r.accelerate.yaml"][0])["mixed_precision"] == "no"
    planned = _render(load_fixture_plan(CURRENT))
    assert yaml.safe_load(planned.files["r.accelerate.yaml"][0])["mixed_precision"] == "bf16"


def _pools(tp_enabled: bool | None, count: int) -> dict:
    plan = load_fixture_plan(CURRENT)
    config = plan["sft"]["kt"]["kt_config"]
    config["kt_threadpool_count"] = count
    if tp_enabled is None:
        del config["kt_tp_enabled"]
    else:
        config["kt_tp_enabled"] = tp_enabled
    return plan


def test_int8_experts_are_split_over_the_pools_kt_kernel_trains_with(tmp_path):
    """kt-kernel 0.7.2 validates an INT8 tree's manifest against `kt_threadpool_count if kt_tp_enabled else 1`
    (sft/wrapper.py; kt_tp_enabled defaults to false in sft/config.py). Render compared it with
    kt_threadpool_count alone: with TP off it refused the 1-pool tree kt-kernel loads and took the 2-pool
    tree kt-kernel refuses."""
    model = moe_model(tmp_path / "m")
    one, two = write_tree(tmp_path / "one-INT8", numa=1), write_tree(tmp_path / "two-INT8", numa=2)
    for tree in (one, two):
        int8_weights.write_manifest(tree, model)
    for tp_enabled in (False, None):  # TP off, said or by default: one pool
        recipe = yaml.safe_load(_render(_pools(tp_enabled, 2), weight_path=str(one)).files["r.yaml"][0])
        assert recipe["kt_weight_path"] == str(one)
        with pytest.raises(RenderError, match="split over 2 NUMA pools, the plan trains with 1 "):
            _render(_pools(tp_enabled, 2), weight_path=str(two))
    assert _render(_pools(True, 2), weight_path=str(two))
    with pytest.raises(RenderError, match="split over 1 NUMA pools, the plan trains with 2 "):
        _render(_pools(True, 2), weight_path=str(one))
