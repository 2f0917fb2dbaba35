"""SFT plan review 2: a model whose MoE blocks kt-kernel 0.7.2's SFT does not wrap is no feasible plan.

kt_kernel/sft/arch.py get_moe_arch_config (kt-kernel 0.7.2, what ktransformers[sft]==0.7.2 installs) knows
DeepseekV2/V3/V4, KimiK2, Qwen2Moe, Qwen3Moe, Qwen3VLMoe, Qwen3_5Moe, Glm4Moe and Mixtral and raises
KTAMXModelNotSupportedError for any other once the model loads; the plan said feasible with a warning only."""

from __future__ import annotations

import json
from pathlib import Path

import model_configs
import pytest

from ktinfra import catalog
from ktinfra.planner import load_facts, plan

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
REFUSAL = "wraps no MoE block of"


def _sft(tmp_path, config: dict, stack: str = "kt-0.7") -> dict:
    (tmp_path / "config.json").write_text(json.dumps(config))
    facts = load_facts(str(FACTS / "dual-spr-2xnuma-4xl40s.json"))
    return plan(facts, str(tmp_path), "sft", stack=stack)


@pytest.mark.parametrize(
    ("name", "model_type"),
    [
        ("ERNIE_4_5_21B_A3B", "ernie4_5_moe"),
        ("QWEN3_NEXT_80B_A3B", "qwen3_next"),
        ("MINIMAX_M2", "minimax_m2"),
    ],
)
def test_an_architecture_kt_sft_does_not_wrap_is_refused(tmp_path, name, model_type):
    result = _sft(tmp_path, getattr(model_configs, name))
    assert result["feasible"] is False
    refusal = [p for p in result["problems"] if REFUSAL in p]
    assert refusal == [
        f"KT fine-tuning (kt-kernel 0.7.2, kt_kernel/sft/arch.py) wraps no MoE block of {model_type}: the "
        "run would stop with KTAMXModelNotSupportedError once the model loaded; it supports "
        "DeepseekV2/V3/V4, Kimi-K2, Qwen2Moe, Qwen3Moe, Qwen3VLMoe, Qwen3_5Moe, Glm4Moe and Mixtral"
    ]


def test_ernie_was_feasible_before_and_only_this_refuses_it(tmp_path):
    # the host has room for it: the one problem is the architecture (old code: feasible, a warning only)
    result = _sft(tmp_path, model_configs.ERNIE_4_5_21B_A3B)
    assert len(result["problems"]) == 1 and REFUSAL in result["problems"][0]


@pytest.mark.parametrize(
    "name", ["QWEN2_57B_A14B", "QWEN3_5_35B_A3B", "QWEN3_VL_30B_A3B", "MIXTRAL_8X7B", "GLM_4_5_AIR"]
)
def test_architectures_kt_sft_wraps_are_not_refused_for_it(tmp_path, name):
    result = _sft(tmp_path, getattr(model_configs, name))
    assert not [p for p in result["problems"] if REFUSAL in p]


@pytest.mark.parametrize("model", [m.name for m in catalog.list_models()])
def test_every_catalog_model_is_one_kt_sft_wraps(model):
    result = plan(load_facts(str(FACTS / "dual-spr-2xnuma-4xl40s.json")), model, "sft")
    assert not [p for p in result["problems"] if REFUSAL in p]


def test_the_legacy_stack_refuses_it_by_its_rule_files_instead(tmp_path):
    result = _sft(tmp_path, model_configs.ERNIE_4_5_21B_A3B, stack="kt-0.4-autodl")
    assert not [p for p in result["problems"] if REFUSAL in p]
    assert any("no legacy kt_optimize_rule is known" in p for p in result["problems"])
