"""What the added_tokens.json refusal (7c5c25b) tells the user, and which files it reads as sglang-kt does.

transformers 4.x's tokenizer save writes added_tokens.json for every token at or past the base vocabulary
(tokenization_utils_fast.py _save_pretrained: index >= self.vocab_size), so every LLaMA-Factory LoRA of a
Qwen model trained with it holds Qwen's special tokens there, and sglang-kt refuses it at start whatever the
entries are (lora_config.py counts len() of the file). The remedy said to serve a copy without the file
'where the model's vocabulary already holds them (ids below its vocab_size)': a token added for training
(Qwen3: id 151669, below config.json's 151936) passed that test, and the copy served without it tokenizes that
token as text. The safe copy is only where each entry has the same id in the base model's tokenizer; where the
adapter's base_model_name_or_path is a directory here, ktinfra now compares and says which remedy applies.

sglang-kt reads the file with open() and json.load, catching only a JSON syntax error: a file that is not
UTF-8 stops the adapter's load (ktinfra passed it), a UTF-8 BOM is a syntax error counted as no token (ktinfra
refused it), a JSON number fails on len()."""

from __future__ import annotations

import json
import shutil

import pytest
from test_lora import peft_dir

from ktinfra import lora

QWEN_SPECIAL = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}


def _base_model(root):
    """A Qwen-like base model directory: BPE vocabulary below 151643, the special tokens added after it."""
    root.mkdir(parents=True)
    tokenizer = {
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}},
        "added_tokens": [{"id": i, "content": t, "special": True} for t, i in QWEN_SPECIAL.items()],
    }
    (root / "tokenizer.json").write_text(json.dumps(tokenizer))
    (root / "config.json").write_text(json.dumps({"vocab_size": 151936}))
    return root


def _adapter(tmp_path, tokens, base=None):
    adapter = peft_dir(tmp_path / "out", base=str(base) if base else "Qwen/Qwen3-8B")
    (adapter / "added_tokens.json").write_bytes(
        tokens if isinstance(tokens, bytes) else json.dumps(tokens).encode()
    )
    return adapter


def _refusal(adapter) -> str:
    with pytest.raises(lora.LoraError) as err:
        lora.check_served_as_is(lora.inspect_adapter("e", adapter))
    return str(err.value)


def test_the_base_models_own_tokens_get_the_copy_command_and_the_copy_is_served(tmp_path):
    base = _base_model(tmp_path / "Qwen3-8B")
    adapter = _adapter(tmp_path, QWEN_SPECIAL, base)
    message = _refusal(adapter)
    assert f"Each entry has the same id in the base model's tokenizer ({base / 'tokenizer.json'})" in message
    out = adapter.resolve()
    command = f"cp -r {out} {out}-served && rm {out}-served/added_tokens.json"
    assert command in message
    served = tmp_path / "out-served"
    shutil.copytree(adapter, served)
    (served / "added_tokens.json").unlink()
    lora.check_served_as_is(lora.inspect_adapter("e", served))


def test_a_token_added_for_training_is_not_told_to_drop_the_file(tmp_path):
    """id 151669 is below config.json's vocab_size (151936), which the old remedy took as safe."""
    base = _base_model(tmp_path / "Qwen3-8B")
    message = _refusal(_adapter(tmp_path, {**QWEN_SPECIAL, "<tool_x>": 151669}, base))
    assert "1 of them the base model's tokenizer" in message and "(<tool_x> 151669)" in message
    assert "llamafactory-cli export" in message
    assert "cp -r" not in message and "vocab_size" not in message


def test_without_the_base_model_here_the_condition_is_the_same_id_in_its_tokenizer(tmp_path):
    message = _refusal(_adapter(tmp_path, QWEN_SPECIAL))
    assert "same id in the served model's own tokenizer (its tokenizer.json added_tokens)" in message
    assert "(added for training)" in message and "llamafactory-cli export" in message
    assert "vocab_size" not in message


def test_a_file_sglang_cannot_decode_is_refused(tmp_path):
    message = _refusal(_adapter(tmp_path, b'{"\xff\xfe": 151669}'))
    assert "sglang-kt cannot read it (UnicodeDecodeError" in message


def test_a_utf8_bom_is_counted_as_no_token_as_sglang_does(tmp_path):
    adapter = _adapter(tmp_path, b"\xef\xbb\xbf" + json.dumps(QWEN_SPECIAL).encode())
    lora.check_served_as_is(lora.inspect_adapter("e", adapter))


def test_a_json_number_is_not_called_a_list_of_tokens(tmp_path):
    message = _refusal(_adapter(tmp_path, 3))
    assert "holds 3, not a JSON object; sglang-kt takes its len()" in message
