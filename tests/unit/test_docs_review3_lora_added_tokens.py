"""docs/readme/lora.md says what ktinfra does with added-token embeddings and added_tokens.json.

The page said "Left alone: SGLang's added-token embeddings (`input_embeddings`, `output_embeddings`)", the
rule of 4e64a37; since d5d550f `lora.inspect_adapter` refuses non-empty ones on both stacks (empty ones
pass), and since 7c5c25b `lora.check_served_as_is` refuses an adapter served as it is on the current stack
with a non-empty added_tokens.json, which the page did not mention. The page's "Left alone:" sentence must
not name what the code refuses, and the page must name added_tokens.json; the code side is checked here
too, so a change of either shows up."""

import json
from pathlib import Path

import pytest
from safetensors_file import write_safetensors
from test_lora import peft_dir

from ktinfra import lora

PAGE = Path(__file__).resolve().parents[2] / "docs" / "readme" / "lora.md"
ATTENTION = {
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": [4, 64],
    "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": [64, 4],
}


def _text() -> str:
    return " ".join(PAGE.read_text(encoding="utf-8").split())


def _left_alone() -> str:
    """The sentence naming what the checks leave alone."""
    return _text().split("Left alone:", 1)[1].split(". ", 1)[0]


def _adapter(tmp_path, embeddings_rows: int, added_tokens: dict | None = None):
    adapter = peft_dir(tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps(config | {"target_modules": ["q_proj"]}))
    write_safetensors(
        adapter / "adapter_model.safetensors", ATTENTION | {"input_embeddings": [embeddings_rows, 64]}
    )
    if added_tokens is not None:
        (adapter / "added_tokens.json").write_text(json.dumps(added_tokens))
    return adapter


def test_the_code_refuses_added_token_embeddings_and_a_listed_added_token(tmp_path):
    with pytest.raises(lora.LoraError):
        lora.inspect_adapter("a", _adapter(tmp_path / "rows", 2))
    lora.inspect_adapter("a", _adapter(tmp_path / "empty", 0))  # an empty one loads as nothing
    listed = lora.inspect_adapter("a", _adapter(tmp_path / "listed", 0, {"<extra>": 151669}))
    with pytest.raises(lora.LoraError, match="added_tokens.json"):
        lora.check_served_as_is(listed)


def test_the_page_leaves_alone_only_what_the_code_leaves_alone():
    left_alone = _left_alone()
    assert "base_layer.weight" in left_alone, left_alone
    assert "input_embeddings" not in left_alone and "output_embeddings" not in left_alone, left_alone
    assert "empty added-token embeddings" in left_alone, left_alone


def test_the_page_names_the_added_tokens_file_refusal():
    text = _text()
    assert "`input_embeddings`" in text and "`added_tokens.json`" in text
