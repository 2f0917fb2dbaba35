"""Published config.json files of MoE models outside the catalog: sized to their model cards' totals."""

import json

import pytest
from model_configs import GLM_4_5_AIR, LLAMA4_MAVERICK, LLAMA4_SCOUT, MINIMAX_M2, QWEN2_57B_A14B

from ktinfra import catalog


def _resolve(tmp_path, config: dict) -> catalog.Architecture:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return catalog.resolve(str(tmp_path))


# (config, published total, published active); Llama-4's totals include its ~1B vision encoder
PUBLISHED = {
    "GLM-4.5-Air": (GLM_4_5_AIR, 106e9, 12e9),
    "Qwen2-57B-A14B": (QWEN2_57B_A14B, 57.4e9, 14.2e9),
    "MiniMax-M2": (MINIMAX_M2, 230e9, 10e9),
    "Llama-4-Scout": (LLAMA4_SCOUT, 109e9, 17e9),
    "Llama-4-Maverick": (LLAMA4_MAVERICK, 400e9, 17e9),
}


@pytest.mark.parametrize("name", PUBLISHED)
def test_parameter_counts_match_the_model_cards(tmp_path, name):
    config, total, active = PUBLISHED[name]
    arch = _resolve(tmp_path, config)
    assert arch.total_params == pytest.approx(total, rel=0.03)
    assert arch.active_params == pytest.approx(active, rel=0.12)


def test_llama4_maverick_interleaves_dense_and_moe_layers(tmp_path):
    arch = _resolve(tmp_path, LLAMA4_MAVERICK)
    assert (arch.num_moe_layers, arch.num_dense_layers) == (24, 24)
    assert arch.dense_intermediate_size == 16384  # intermediate_size_mlp, not the experts' 8192
    assert arch.shared_intermediate_size == 8192  # Llama4TextMoe's shared expert


def test_explicit_moe_layers_win_over_the_interleave_step(tmp_path):
    text = {**LLAMA4_MAVERICK["text_config"], "moe_layers": [1, 3, 5]}
    arch = _resolve(tmp_path, {**LLAMA4_MAVERICK, "text_config": text})
    assert arch.num_moe_layers == 3


def test_qwen_decoder_sparse_step_puts_experts_in_every_nth_layer(tmp_path):
    arch = _resolve(tmp_path, {**QWEN2_57B_A14B, "decoder_sparse_step": 2, "mlp_only_layers": [1]})
    assert arch.num_moe_layers == 13  # layers 3, 5, ..., 27 (layer 1 is listed as MLP-only)
