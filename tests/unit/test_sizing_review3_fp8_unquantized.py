"""FP8 checkpoints keep the MoE routers and the MTP layers' eh_proj in bf16 (DeepSeek-V3's mlp.gate.weight
and layers.61.eh_proj.weight carry no weight_scale_inv; SGLang builds MoEGate / the Qwen gates with
quant_config=None and eh_proj as a plain nn.Linear). Hand-counted on a tiny config."""

from __future__ import annotations

from ktinfra import catalog, sizing

FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
TINY = {
    "model_type": "qwen3_moe", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 128, "moe_intermediate_size": 128, "num_experts": 4,
    "num_experts_per_tok": 2, "vocab_size": 1000, "tie_word_embeddings": False,
    "quantization_config": FP8,
}  # fmt: skip


def tiny(**extra):
    return catalog.from_config({**TINY, **extra}, name="tiny-fp8")


def test_fp8_gpu_weights_keep_the_routers_in_bf16():
    arch = tiny()
    # attention 2 x 196,608 in fp8 with one fp32 scale per 128x128 block (+96 bytes), the routers
    # (2 x 256 x 4) and embedding + head (2 x 256,000) in bf16
    assert sizing.gpu_non_expert_bytes(arch, "fp8") == 393_216 + 96 + 2_048 * 2 + 512_000 * 2
    assert sizing.serve(arch, "AMXINT8").breakdown["gpu_weights"] == 1_421_408


def test_fp8_download_keeps_routers_and_mtp_eh_proj_in_bf16():
    arch = tiny(num_nextn_predict_layers=1)
    # bf16: embedding, head, the MTP layer's own embedding and head (512,000), the 3 routers (3 x 1,024)
    # and eh_proj (2 x 256 x 256)
    bf16 = 256_000 * 2 + 512_000 + 3 * 1_024 + 131_072
    fp8 = 2_927_616 - bf16  # attention x 3, experts x 3 layers
    assert fp8 == 1_769_472
    assert sizing.download_bytes(arch) == fp8 + 432 + 2 * bf16


def test_tensor_parallel_router_copies_are_bf16():
    arch = tiny()
    # TP 2: one more copy of the routers (2,048, bf16) and of the one KV head's K/V projections
    # (2 x 128 x 256 x 2 layers = 131,072, fp8 + 32 bytes of scales)
    assert sizing.tp_extra_params(arch, 2) == 2_048 + 131_072
    assert sizing.tp_extra_bytes(arch, 2, "fp8") == 131_072 + 32 + 2_048 * 2
    assert sizing.tp_extra_bytes(arch, 1, "fp8") == 0
