"""DeepSeek-V3's FP8 checkpoint keeps its MTP layer's own embedding and output head in bf16, as it keeps the
main ones: a public tensor listing of the DeepSeek-R1 repo (DeepSeek-V3's architecture and layout, 163
safetensors files) gives model.layers.61.embed_tokens.weight and model.layers.61.shared_head.head.weight as
torch.bfloat16 [129280, 7168], 1.73 GiB each, and 641.29 GiB of tensors (684,531,386,000 parameters) in
all. The download estimate counted those two copies as fp8 weights, 1.85 GB short."""

import pytest

from ktinfra import catalog, sizing

# 641.29 GiB of tensors; the rest of the gap to the estimate is the bf16 routers and eh_proj (~0.2 GB)
DEEPSEEK_V3_CHECKPOINT_BYTES = 641.29 * 2**30
DEEPSEEK_V3_PARAMS = 684_531_386_000


def test_deepseek_v3_download_counts_the_mtp_embedding_and_head_in_bf16():
    arch = catalog.resolve("DeepSeek-V3")
    assert arch.total_params + arch.mtp_params == pytest.approx(DEEPSEEK_V3_PARAMS, rel=1e-4)
    # within 0.05 % (0.34 GB); the old estimate was 2.06 GB (0.3 %) short
    assert sizing.download_bytes(arch) == pytest.approx(DEEPSEEK_V3_CHECKPOINT_BYTES, rel=5e-4)
    assert arch.mtp_embedding_params == 2 * 129280 * 7168


def test_mtp_layers_without_their_own_embeddings_add_no_bf16_copies():
    config = {**catalog.entry_config("DeepSeek-V3"), "num_nextn_predict_layers": 0}
    arch = catalog.from_config(config, name="x")
    assert arch.mtp_embedding_params == 0 and arch.mtp_params == 0
    qwen_next = catalog.from_config(
        {**catalog.entry_config("Qwen3-30B-A3B"), "model_type": "qwen3_next"}, name="y"
    )  # one implicit MTP layer that uses the main model's embedding and head
    assert qwen_next.num_mtp_layers == 1 and qwen_next.mtp_embedding_params == 0
    bf16 = sizing.download_bytes(qwen_next)
    assert bf16 == (qwen_next.total_params + qwen_next.mtp_params) * 2
