#!/usr/bin/env python3
"""Make a tiny random-weight Qwen3-MoE (model + tokenizer) on disk, and optionally LoRA outputs for it.

Used by tests/integration/operate to run a real OpenAI-compatible server on the CPU. Nothing is downloaded:
the byte-level BPE tokenizer is trained here on a small word list. Run it with the serving venv's python
(needs torch, transformers, tokenizers; peft for --lora-out / --kt-lora-out).

--lora-out: a plain PEFT adapter (attention projections). --kt-lora-out: the layout a KT LoRA fine-tune
(kt-kernel 0.7.2 with fused expert LoRA) leaves in its output directory, which kt-kernel's
convert_kt_to_sglang_adapter.py reads: PEFT's adapter_config.json + adapter_model.safetensors for the
non-expert modules, fused_expert_lora.safetensors, and kt_adapter_manifest.json written last.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = (
    "the of and to in is was for on are with as by at be this from or an have not they which one you "
    "were all we when there can been has more if will no out so what up about than into them only other "
    "time some could these two may first then do any like my now over such our man me even most made "
    "after also did many before must through back years where much your way well down should because "
    "each just hello user assistant system"
)


def make_tokenizer(out: Path, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([CORPUS] * 50, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def make_model(out: Path, vocab_size: int, seed: int):
    import torch
    from transformers import GenerationConfig, Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(seed)
    tokenizer = make_tokenizer(out, vocab_size)
    config = Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_experts=8,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3MoeForCausalLM(config).eval()
    with torch.no_grad():
        # Random weights would stop at EOS at random; a zero EOS row keeps greedy output at max_tokens.
        for token in SPECIALS:
            model.lm_head.weight[tokenizer.convert_tokens_to_ids(token)] = 0.0
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=False
    )
    model.save_pretrained(out)
    return model


def make_lora(model_dir: Path, out: Path, rank: int, seed: int) -> None:
    """A real PEFT adapter on the attention projections, saved by peft itself."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(model_dir)
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(base, config)
    with torch.no_grad():  # PEFT starts lora_B at zero; make the adapter actually change outputs
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.02)
    peft_model.save_pretrained(out)


FUSED_NAMES = ("gate_lora_a", "gate_lora_b", "up_lora_a", "up_lora_b", "down_lora_a", "down_lora_b")


def fused_expert_shapes(experts: int, hidden: int, inter: int, rank: int) -> dict[str, tuple[int, ...]]:
    """Shapes of kt-kernel's fused expert LoRA buffers (kt_kernel/sft/lora.py,
    _create_fused_expert_lora_buffers): lora_a [E, r, in], lora_b [E, out, r]."""
    return {
        "gate_lora_a": (experts, rank, hidden),
        "gate_lora_b": (experts, inter, rank),
        "up_lora_a": (experts, rank, hidden),
        "up_lora_b": (experts, inter, rank),
        "down_lora_a": (experts, rank, inter),
        "down_lora_b": (experts, hidden, rank),
    }


def _file_record(path: Path) -> dict:
    import hashlib

    return {"size": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def make_kt_lora(model_dir: Path, out: Path, rank: int, seed: int) -> None:
    """A KT-format LoRA training output for the tiny model. The PEFT part is saved by real peft. The fused
    expert tensors are random and constructed here, not trained (training them needs kt-kernel's AMX/AVX-512
    kernels): same key names, shapes, dtype (bf16) and file names as kt-kernel 0.7.2 saves, so the converter
    reads them exactly as it reads a real run's."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig

    make_lora(model_dir, out, rank, seed)
    config = AutoConfig.from_pretrained(model_dir)
    shapes = fused_expert_shapes(config.num_experts, config.hidden_size, config.moe_intermediate_size, rank)
    generator = torch.Generator().manual_seed(seed + 1)
    tensors = {
        f"layers.{layer}.experts.{name}": (torch.randn(shape, generator=generator) * 0.02).to(torch.bfloat16)
        for layer in range(config.num_hidden_layers)
        for name, shape in shapes.items()
    }
    fused = out / "fused_expert_lora.safetensors"
    save_file(tensors, str(fused))
    contract = {k: {"shape": list(v.shape), "dtype": "BF16"} for k, v in sorted(tensors.items())}
    adapter_config = json.loads((out / "adapter_config.json").read_text())
    artifacts = {n: _file_record(out / n) for n in ("adapter_config.json", "adapter_model.safetensors")}
    artifacts[fused.name] = {**_file_record(fused), "tensor_count": len(contract), "tensors": contract}
    manifest = {  # kt_kernel/sft/artifacts.py save_kt_adapter_artifacts, BF16 base without a KT cache plan
        "version": 1,
        "status": "ready",
        "expert_weight_format": "bf16",
        "base": {"model_name_or_path": str(model_dir.resolve())},
        "lora": {"rank": rank, "alpha": float(adapter_config["lora_alpha"])},
        "artifacts": artifacts,
    }
    (out / "kt_adapter_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="model directory to write")
    parser.add_argument("--vocab-size", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lora-out", type=Path, help="also write a PEFT LoRA adapter here")
    parser.add_argument("--kt-lora-out", type=Path, help="also write a KT-format LoRA training output here")
    parser.add_argument("--lora-rank", type=int, default=4)
    args = parser.parse_args()
    if not (args.out / "config.json").is_file():
        args.out.mkdir(parents=True, exist_ok=True)
        make_model(args.out, args.vocab_size, args.seed)
    if args.lora_out and not (args.lora_out / "adapter_config.json").is_file():
        make_lora(args.out, args.lora_out, args.lora_rank, args.seed)
    if args.kt_lora_out and not (args.kt_lora_out / "kt_adapter_manifest.json").is_file():
        make_kt_lora(args.out, args.kt_lora_out, args.lora_rank, args.seed)
    summary = {
        "model": str(args.out),
        "lora": str(args.lora_out) if args.lora_out else None,
        "kt_lora": str(args.kt_lora_out) if args.kt_lora_out else None,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
