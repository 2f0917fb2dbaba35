"""Kimi-Linear (moonshotai/Kimi-Linear-48B-A3B-Instruct): 27 layers, of which linear_attn_config.kda_layers
(numbered from 1, SGLang's KimiLinearConfig.is_kda_layer) are Kimi Delta Attention with a fixed-size state
per request and the other 7 MLA with a KV cache. Before, every layer was sized as MLA."""

from __future__ import annotations

import pytest

from ktinfra import catalog, sizing

FULL = [4, 8, 12, 16, 20, 24, 27]
KIMI_LINEAR = {
    "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear", "hidden_size": 2304,
    "head_dim": 72, "intermediate_size": 9216, "moe_intermediate_size": 1024, "num_hidden_layers": 27,
    "num_attention_heads": 32, "num_key_value_heads": 32, "kv_lora_rank": 512, "q_lora_rank": None,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": True,
    "num_experts": 256, "num_experts_per_token": 8, "num_shared_experts": 1, "first_k_dense_replace": 1,
    "moe_layer_freq": 1, "vocab_size": 163840, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "linear_attn_config": {
        "full_attn_layers": FULL, "kda_layers": [i for i in range(1, 28) if i not in FULL],
        "head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4,
    },
}  # fmt: skip


def kimi_linear(**linear):
    config = {**KIMI_LINEAR, "linear_attn_config": {**KIMI_LINEAR["linear_attn_config"], **linear}}
    return catalog.from_config(config, name="Kimi-Linear-48B-A3B")


def test_only_the_mla_layers_hold_a_kv_cache():
    arch = kimi_linear()
    assert arch.num_kv_layers == 7 and arch.linear_attention.num_layers == 20
    assert sizing.kv_bytes_per_token(arch) == (512 + 64) * 7 * 2  # was 31,104: all 27 layers
    assert sizing.serve(arch).breakdown["kv_cache_min"] == 8_064 * sizing.SERVE_MIN_KV_TOKENS


def test_the_kda_layers_hold_a_recurrent_state_per_request():
    arch = kimi_linear()
    # KimiLinearStateShape: 3 convolutions of 32 x 128 channels x (4 - 1) in bf16, 32 heads x 128 x 128 fp32
    per_layer = 3 * 4096 * 3 * 2 + 32 * 128 * 128 * 4
    assert sizing.state_bytes_per_slot(arch) == 20 * per_layer == 43_417_600
    assert sizing.serve(arch).breakdown["recurrent_state_min"] == 3 * 43_417_600


def test_kda_layers_count_their_own_projections():
    arch = kimi_linear()
    # q, k, v, o 2304 x 4096; f_a, g_a 2304 -> 128; f_b, g_b 128 -> 4096; b_proj 2304 -> 32; 3 convs of 4
    kda = 4 * 2304 * 4096 + 2 * (2304 * 128 + 128 * 4096) + 2304 * 32 + 3 * 4 * 4096
    mla = 2304 * 32 * 192 + 2304 * 576 + 512 * 32 * 256 + 32 * 128 * 2304
    assert arch.attention_params == 20 * kda + 7 * mla
    assert round(arch.total_params / 1e9, 1) == 49.1  # the card's 48B total (49.1B in its safetensors)


@pytest.mark.parametrize(
    ("linear", "message"),
    [
        ({"kda_layers": "1-26"}, "kda_layers must list layer numbers 1..27"),
        ({"kda_layers": [1, 99]}, "kda_layers must list layer numbers 1..27"),
        ({"kda_layers": list(range(1, 28))}, "leaves no full-attention layer"),
        ({"num_heads": None}, "lacks num_heads"),
    ],
)
def test_a_damaged_linear_attn_config_is_named(linear, message):
    with pytest.raises(catalog.ModelConfigError, match=message):
        kimi_linear(**linear)


def test_no_kda_layers_is_all_mla():
    assert kimi_linear(kda_layers=[]).num_kv_layers == 27
