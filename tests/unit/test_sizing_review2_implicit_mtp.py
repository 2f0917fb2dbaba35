"""Qwen3-Next's checkpoint holds one MTP layer (mtp.* weights) that its config.json does not count:
sglang-kt's model_config.py sets num_nextn_predict_layers = 1 for Qwen3NextForCausalLM drafts and
qwen3_next_mtp.py takes the embedding and head from the target model. The download was sized without it,
1.65B parameters (3.3 GB bf16) low; with it the checkpoint holds 81.3B."""

from __future__ import annotations

import json

import pytest
from model_configs import QWEN3_NEXT_80B_A3B

from ktinfra import catalog, sizing


def _resolve(tmp_path, config: dict):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return catalog.resolve(str(tmp_path))


def test_qwen3_next_downloads_its_uncounted_mtp_layer(tmp_path):
    arch = _resolve(tmp_path, QWEN3_NEXT_80B_A3B)
    assert (arch.num_mtp_layers, arch.mtp_own_embeddings) == (1, False)
    # one gated full-attention MoE layer with a shared expert, and the fc that joins embedding and state
    layer = arch.attention_params_per_layer + 512 * arch.expert_params + 3 * 2048 * 512 + 2048 * 512
    assert arch.mtp_params == layer + 2 * 2048 * 2048 == 1_650_458_624
    assert (arch.total_params + arch.mtp_params) / 1e9 == pytest.approx(81.3, abs=0.05)
    assert sizing.download_bytes(arch) == 2 * (arch.total_params + arch.mtp_params)
    assert arch.total_params / 1e9 == pytest.approx(79.67, abs=0.01)  # the language model is unchanged


def test_an_mtp_count_in_config_json_wins(tmp_path):
    arch = _resolve(tmp_path, {**QWEN3_NEXT_80B_A3B, "num_nextn_predict_layers": 0})
    assert arch.num_mtp_layers == 0
    arch = _resolve(tmp_path, {**QWEN3_NEXT_80B_A3B, "mtp_use_dedicated_embeddings": True})
    assert (arch.num_mtp_layers, arch.mtp_own_embeddings) == (1, True)


def test_other_families_without_an_mtp_key_have_none():
    assert catalog.resolve("Qwen3-30B-A3B").num_mtp_layers == 0
    assert catalog.resolve("Kimi-K2").num_mtp_layers == 0  # num_nextn_predict_layers: 0
    assert catalog.resolve("DeepSeek-V3").num_mtp_layers == 1
