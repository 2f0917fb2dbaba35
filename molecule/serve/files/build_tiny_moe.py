"""Build a tiny random-weight Qwen3-MoE checkpoint (safetensors + config + tokenizer files).

Run with a Python that has torch and transformers (a throwaway venv: the targets never need them):
    python build_tiny_moe.py /var/cache/ktinfra/tiny-qwen3-moe
"""

import sys
from pathlib import Path

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM


def main(out: Path) -> None:
    if (out / "config.json").is_file():
        print(f"{out} exists")
        return
    torch.manual_seed(0)
    config = Qwen3MoeConfig(
        vocab_size=512, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        num_experts=8, num_experts_per_tok=2, decoder_sparse_step=1, max_position_embeddings=512,
        torch_dtype="bfloat16",
    )  # fmt: skip
    model = Qwen3MoeForCausalLM(config).to(torch.bfloat16)
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp, safe_serialization=True)
    (tmp / "tokenizer_config.json").write_text('{"model_max_length": 512}')
    tmp.rename(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
