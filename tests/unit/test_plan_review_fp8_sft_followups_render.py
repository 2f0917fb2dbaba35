"""render train of an FP8-experts SFT plan with --weight-format int8|int4 switched the recipe to converted
experts (kt_backend AMXINT8/AMXINT4), contradicting the plan, whose RAM was sized for the FP8 experts
(883f944 follow-up): it is refused now."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ktinfra.planner import load_facts, plan
from ktinfra.render.common import RenderError
from ktinfra.render.train import render_train

HOST = Path(__file__).resolve().parents[1] / "fixtures" / "facts" / "dual-spr-2xnuma-4xl40s.json"
ARGS = {
    "name": "v3",
    "model_path": "/models/DeepSeek-V3",
    "dataset": "d",
    "dataset_dir": "/d",
    "output_dir": "/o",
}


def _fp8_plan() -> dict:
    result = json.loads(json.dumps(plan(load_facts(str(HOST)), "DeepSeek-V3", "sft", expert_format="fp8")))
    assert result["feasible"] is True, result["problems"]
    return result


@pytest.mark.parametrize("weight_format", ["int8", "int4"])
@pytest.mark.parametrize("weight_path", ["/ckpt/DeepSeek-V3-conv", None])
def test_render_refuses_weight_format_for_an_fp8_plan(weight_format, weight_path):
    with pytest.raises(
        RenderError, match=f"--weight-format {weight_format}: the plan trains the checkpoint's FP8"
    ):
        render_train(_fp8_plan(), **ARGS, weight_path=weight_path, weight_format=weight_format)


def test_render_of_an_fp8_plan_without_weight_format_is_unchanged():
    recipe = yaml.safe_load(render_train(_fp8_plan(), **ARGS).files["v3.yaml"][0])
    assert recipe["kt_config"]["kt_backend"] == "FP8" and recipe["kt_weight_path"] == ARGS["model_path"]
