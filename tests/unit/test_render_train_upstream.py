"""render train against what the stacks' upstream code accepts (llamafactory-kt 0.9.6.dev0, transformers-kt
5.6, kt-kernel 0.7.2 sft/; LLaMA-Factory 0.9.4 for the legacy stack)."""

from __future__ import annotations

import pytest
import yaml
from test_render_support import load_fixture_plan

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
