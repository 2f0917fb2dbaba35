"""The SFT plan of a Qwen3.5-MoE / Qwen3-VL-MoE model (chat template qwen3_5 / qwen3_vl: the collator adds a
dummy image's tokens to a text-only batch) plans kt_config.kt_model_max_length = batch x (cutoff_len + 128)
padded to 8 and says why; render train only filled it in (5f92f41), so the plan did not show it."""

from __future__ import annotations

import json
from pathlib import Path

import model_configs
import pytest
import yaml
from test_render_support import render_train_here

from ktinfra.planner import load_facts, plan

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"


def _sft(tmp_path, config: dict, **opts) -> dict:
    (tmp_path / "config.json").write_text(json.dumps(config))
    facts = load_facts(str(FACTS / "dual-spr-2xnuma-4xl40s.json"))
    return plan(facts, str(tmp_path), "sft", stack="kt-0.7", **opts)


@pytest.mark.parametrize("name", ["QWEN3_5_35B_A3B", "QWEN3_VL_30B_A3B"])
@pytest.mark.parametrize("cutoff_len", [None, 1000])
def test_a_dummy_image_model_plans_room_in_kt_model_max_length(tmp_path, name, cutoff_len):
    result = _sft(tmp_path, getattr(model_configs, name), cutoff_len=cutoff_len)
    sft = result["sft"]
    batch, cutoff = sft["per_device_train_batch_size"], sft["cutoff_len"]
    need = batch * -(-(cutoff + 128) // 8) * 8
    assert sft["kt"]["kt_config"]["kt_model_max_length"] == need
    why = result["reasons"]["kt"]
    assert f"kt_model_max_length {need} = batch {batch} x (cutoff_len {cutoff} + 128" in why
    assert "dummy image" in why


def test_the_planned_value_is_what_render_train_takes(tmp_path):
    (tmp_path / "model").mkdir()
    result = _sft(tmp_path / "model", model_configs.QWEN3_5_35B_A3B)
    rendered = render_train_here(result, tmp_path)
    recipe = yaml.safe_load(rendered.files["r.yaml"][0])
    planned = result["sft"]["kt"]["kt_config"]["kt_model_max_length"]
    assert recipe["kt_config"]["kt_model_max_length"] == planned


def test_a_text_model_plans_none(tmp_path):
    result = _sft(tmp_path, model_configs.QWEN2_57B_A14B)
    assert "kt_model_max_length" not in result["sft"]["kt"]["kt_config"]
    assert "dummy image" not in result["reasons"]["kt"]
