"""render train of an FP8-experts SFT plan (`ktinfra plan --mode sft --expert-format fp8`): the recipe trains
the checkpoint's FP8 experts (kt_backend FP8, kt_expert_weight_format fp8) and points kt_weight_path at the
raw FP8 safetensors, as kt-kernel 0.7.2's wrapper asks ("FP8 SFT requires raw safetensors checkpoint files.
Point kt_weight_path at model_name_or_path")."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ktinfra.planner import load_facts, plan
from ktinfra.render.train import render_train

HOST = Path(__file__).resolve().parents[1] / "fixtures" / "facts" / "dual-spr-2xnuma-4xl40s.json"
ARGS = {
    "name": "v3",
    "model_path": "/models/DeepSeek-V3",
    "dataset": "d",
    "dataset_dir": "/d",
    "output_dir": "/o",
}


def _recipe(expert_format: str | None, **options) -> dict:
    result = json.loads(
        json.dumps(plan(load_facts(str(HOST)), "DeepSeek-V3", "sft", expert_format=expert_format))
    )
    assert result["feasible"] is True, result["problems"]
    return yaml.safe_load(render_train(result, **ARGS, **options).files["v3.yaml"][0])


def test_fp8_plan_renders_the_fp8_recipe_reading_the_model_checkpoint():
    recipe = _recipe("fp8")
    config = recipe["kt_config"]
    assert (config["kt_backend"], config["kt_expert_weight_format"]) == ("FP8", "fp8")
    assert config["kt_share_backward_bb"] is True
    assert recipe["kt_weight_path"] == ARGS["model_path"] == recipe["model_name_or_path"]


def test_fp8_plan_with_weight_path_reads_the_fp8_checkpoint_there():
    recipe = _recipe("fp8", weight_path="/ckpt/DeepSeek-V3-fp8")
    assert recipe["kt_weight_path"] == "/ckpt/DeepSeek-V3-fp8"
    assert recipe["kt_config"]["kt_backend"] == "FP8"


def test_the_default_bf16_plan_renders_as_before(tmp_path):
    facts = load_facts(str(HOST))
    facts["memory"]["total_bytes"] = facts["memory"]["meminfo_total_bytes"] = (
        2 * facts["memory"]["total_bytes"]
    )
    result = json.loads(json.dumps(plan(facts, "DeepSeek-V3", "sft")))
    assert result["feasible"] is True, result["problems"]
    recipe = yaml.safe_load(render_train(result, **ARGS).files["v3.yaml"][0])
    assert recipe["kt_config"]["kt_backend"] == "AMXBF16" and "kt_weight_path" not in recipe
