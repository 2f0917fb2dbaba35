#!/usr/bin/env python3
"""Make a tiny random-weight Qwen3-MoE (model + tokenizer) on disk, and optionally a PEFT LoRA adapter for it.

Used by tests/integration/operate to run a real OpenAI-compatible server on the CPU. Nothing is downloaded:
the byte-level BPE tokenizer is trained here on a small word list. Run it with the serving venv's python
(needs torch, transformers, tokenizers; peft for --lora-out).
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="model directory to write")
    parser.add_argument("--vocab-size", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lora-out", type=Path, help="also write a PEFT LoRA adapter here")
    parser.add_argument("--lora-rank", type=int, default=4)
    args = parser.parse_args()
    if not (args.out / "config.json").is_file():
        args.out.mkdir(parents=True, exist_ok=True)
        make_model(args.out, args.vocab_size, args.seed)
    if args.lora_out and not (args.lora_out / "adapter_config.json").is_file():
        make_lora(args.out, args.lora_out, args.lora_rank, args.seed)
    summary = {"model": str(args.out), "lora": str(args.lora_out) if args.lora_out else None}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
