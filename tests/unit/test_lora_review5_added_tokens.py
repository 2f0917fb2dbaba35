"""Embeddings of tokens added to the vocabulary (input_embeddings / output_embeddings) in an adapter.

4e64a37 left them alone as "SGLang's added-token embeddings", and an adapter holding them was planned and
served with exit 0, with or without embedding LoRA. No stack serves them: sglang-kt refuses an adapter with
added_tokens.json at start (srt/lora/lora_manager.py validate_new_adapter), without that file
srt/lora/lora.py _process_weight asserts that their rows equal the (zero) added tokens and loading fails;
the legacy fork (eaf832e) copies input_embeddings only beside embed_tokens/lm_head LoRA
(mem_pool.py load_lora_weight_to_buffer) and output_embeddings nowhere. They are now refused, before
anything is written, with which of these applies."""

from __future__ import annotations

import json

import pytest
from safetensors_file import write_safetensors
from test_lora import peft_dir, serve_args
from test_lora_cli_errors import assert_clean_error, invoke
from test_lora_review4_render_planned import current_plan

from ktinfra import lora
from ktinfra.render import RenderError, render_serve

ATTENTION = {
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": [4, 64],
    "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": [64, 4],
}
EMBEDDING = {
    "base_model.model.model.embed_tokens.lora_embedding_A": [4, 128],
    "base_model.model.model.embed_tokens.lora_embedding_B": [64, 4],
}


def _adapter(tmp_path, *groups: dict, targets=("q_proj", "v_proj"), added_tokens: dict | None = None):
    adapter = peft_dir(tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps(config | {"target_modules": list(targets)}))
    write_safetensors(adapter / "adapter_model.safetensors", {k: v for g in groups for k, v in g.items()})
    if added_tokens is not None:
        (adapter / "added_tokens.json").write_text(json.dumps(added_tokens))
    return adapter


@pytest.mark.parametrize(
    ("groups", "targets"),
    [
        ((ATTENTION, {"input_embeddings": [2, 64]}), ("q_proj", "v_proj")),
        ((ATTENTION, {"output_embeddings": [2, 64]}), ("q_proj", "v_proj")),
        ((ATTENTION, EMBEDDING, {"input_embeddings": [2, 64]}), ("q_proj", "embed_tokens")),
    ],
    ids=["input-without-embedding-lora", "output-without-embedding-lora", "input-with-embedding-lora"],
)
def test_added_token_embeddings_are_refused(tmp_path, groups, targets):
    adapter = _adapter(tmp_path, *groups, targets=targets)
    with pytest.raises(lora.LoraError) as caught:
        lora.inspect_adapter("a", adapter)
    said = str(caught.value)
    name = next(k for g in groups for k in g if "_embeddings" in k)
    assert f"adapter_model.safetensors: {name}: embeddings of tokens added to the vocabulary" in said
    assert "without added_tokens.json, loading the adapter fails" in said
    assert "output_embeddings nowhere" in said


def test_with_added_tokens_json_sglang_kt_refuses_it_at_start(tmp_path):
    added = {"<tool>": 128, "</tool>": 129}
    adapter = _adapter(tmp_path, ATTENTION, {"input_embeddings": [2, 64]}, added_tokens=added)
    with pytest.raises(lora.LoraError, match="doesn't support adapters that add tokens to the vocabulary"):
        lora.inspect_adapter("a", adapter)


def test_lora_serve_refuses_it_before_writing(tmp_path):
    adapter = _adapter(tmp_path, ATTENTION, {"input_embeddings": [2, 64]})
    out = tmp_path / "bundle"
    result = invoke([*serve_args(adapter), "--out", str(out), "--json"])
    assert_clean_error(result, "input_embeddings: embeddings of tokens added to the vocabulary")
    assert not out.exists()


def test_render_serve_refuses_it_naming_the_plan_key(tmp_path):
    adapter = _adapter(tmp_path, ATTENTION, {"output_embeddings": [2, 64]})
    with pytest.raises(RenderError, match=r"^plan serve.lora.paths.e: .*tokens added to the vocabulary"):
        render_serve(current_plan({"e": adapter}), name="q", model_path="/m", weight_path="/w")


def test_empty_ones_load_as_nothing_and_pass(tmp_path):
    """Zero rows and no added_tokens.json: the assert holds (0 == 0) and nothing is added."""
    adapter = _adapter(tmp_path, ATTENTION, {"input_embeddings": [0, 64]})
    assert lora.inspect_adapter("a", adapter).warnings == []


@pytest.mark.parametrize("text", ["{}", "not json", "\ufeff{}"], ids=["empty", "no-json", "bom"])
def test_an_added_tokens_file_sglang_counts_as_empty_is_the_assert_case(tmp_path, text):
    """SGLang counts no token in these (lora_config.py catches only the JSON error; a BOM is one), so the
    load fails at _process_weight's assert; before, the file's mere presence made the message say 'refused
    at start'."""
    adapter = _adapter(tmp_path, ATTENTION, {"input_embeddings": [2, 64]})
    (adapter / "added_tokens.json").write_text(text, encoding="utf-8")
    with pytest.raises(lora.LoraError) as caught:
        lora.inspect_adapter("a", adapter)
    said = str(caught.value)
    assert "loading the adapter fails on srt/lora/lora.py _process_weight's assert" in said, said
    assert "refuses the adapter at start" not in said
