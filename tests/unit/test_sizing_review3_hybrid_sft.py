"""SFT of a hybrid model (Qwen3.5-35B-A3B: 30 Gated DeltaNet layers, 10 gated softmax-attention layers):
LoRA (lora_target: all, LLaMA-Factory's find_all_linear_modules) wraps the linear-attention layers' own
projections (transformers' Qwen3_5GatedDeltaNet: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj),
not q/k/v/o. Before, every layer was counted as softmax attention."""

from __future__ import annotations

from model_configs import QWEN3_5_35B_A3B

from ktinfra import catalog, sizing


def qwen35():
    return catalog.from_config(QWEN3_5_35B_A3B, name="Qwen3.5-35B-A3B")


def test_lora_counts_the_linear_attention_projections():
    arch = qwen35()
    assert (arch.num_kv_layers, arch.linear_attention.num_layers) == (10, 30)
    # gated attention: q 2048 -> 2 x 16 x 256, k and v 2048 -> 2 x 256, o 4096 -> 2048
    attention = (2048 + 8192) + 2 * (2048 + 512) + (4096 + 2048)
    # qkv 2048 -> 2 x 2048 + 4096, z 2048 -> 4096, b and a 2048 -> 32, out 4096 -> 2048
    linear = (2048 + 8192) + (2048 + 4096) + 2 * (2048 + 32) + (4096 + 2048)
    shared = 3 * (2048 + 512) * 40
    assert sizing.lora_params_gpu(arch, 8) == 8 * (10 * attention + 30 * linear + shared)


def test_the_working_set_is_the_larger_kind_of_layer():
    arch = qwen35()
    # a Gated DeltaNet layer per token: bf16 8 x 2048 + its projections' outputs (8192 + 4096 + 32 + 32)
    # and output (4096) + 4 x 512 of shared expert; fp32 LoRA inputs 4 x 2048 + 4096, the MLP's
    # 2 x 2048 + 512 and the router's 2048
    linear = (8 * 2048 + 16_448 + 4 * 512) * 2 + (4 * 2048 + 4096 + 2 * 2048 + 512 + 2048) * 4
    assert linear == 145_536
    assert sizing.sft(arch).breakdown["layer_working_set"] == 2048 * linear


def test_a_model_without_linear_attention_is_unchanged():
    arch = catalog.resolve("Qwen3-30B-A3B")
    attention = (2048 + 4096) + 2 * (2048 + 512) + (4096 + 2048)
    assert sizing.lora_params_gpu(arch, 8) == 8 * attention * 48
