"""Tensors saved whole (no LoRA factor) in an adapter whose adapter_config.json has modules_to_save null.

An adapter holding a whole base_model.model.lm_head.weight or embed_tokens.weight (PEFT modules_to_save
written as null by hand, trainable tokens) got only a warning, and `lora serve` rendered it with exit 0.
sglang-kt 0.7.2 and the legacy fork (srt/lora/lora.py _process_weight) keep a tensor outside the decoder
layers only for embed_tokens/lm_head named in target_modules, and mem_pool.py load_lora_weight_to_buffer
copies only their lora_A/lora_B names: the whole weight goes nowhere, with no message, and the adapter is
served without what was trained there. One inside a layer is loaded as its module's lora_B, and loading
fails. Both are now refused (added-token embeddings, input_embeddings/output_embeddings, are refused for
their own reasons: test_lora_review5_added_tokens), not the frozen base weight PEFT's save_pretrained saves
beside embed_tokens/lm_head LoRA by default (save_embedding_layers "auto": <module>.base_layer.weight),
which SGLang skips harmlessly."""

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


def _adapter(tmp_path, *groups: dict, targets=("q_proj", "v_proj"), saved: object = None):
    adapter = peft_dir(tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    config |= {"target_modules": list(targets), "modules_to_save": saved}
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    write_safetensors(adapter / "adapter_model.safetensors", {k: v for g in groups for k, v in g.items()})
    return adapter


@pytest.mark.parametrize("saved", [None, []])
@pytest.mark.parametrize(
    ("whole", "targets"),
    [
        ({"base_model.model.lm_head.weight": [128, 64]}, ("q_proj", "v_proj")),
        ({"base_model.model.model.embed_tokens.weight": [128, 64]}, ("q_proj", "v_proj")),
        # targeted, with its LoRA: mem_pool.py still copies only the lora_* names
        ({**EMBEDDING, "base_model.model.model.embed_tokens.weight": [128, 64]}, ("q_proj", "embed_tokens")),
        ({"base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta": [2, 64]}, ("q_proj",)),
        ({"base_model.model.model.norm.weight": [64]}, ("q_proj",)),
    ],
    ids=["lm_head", "embed_tokens", "embed_tokens-targeted", "trainable-tokens", "norm"],
)
def test_a_whole_tensor_outside_the_layers_is_refused(tmp_path, whole, targets, saved):
    adapter = _adapter(tmp_path, ATTENTION, whole, targets=targets, saved=saved)
    name = next(k for k in whole if ".lora_" not in k)
    with pytest.raises(lora.LoraError) as caught:
        lora.inspect_adapter("a", adapter)
    said = str(caught.value)
    assert f"1 tensor(s) are no LoRA factor ({name})" in said
    assert "would be served without what was trained there" in said and "inside a decoder layer" not in said


def test_a_whole_tensor_inside_a_layer_is_refused_too(tmp_path):
    adapter = _adapter(tmp_path, ATTENTION, {"base_model.model.model.layers.0.mlp.gate.weight": [8, 64]})
    with pytest.raises(lora.LoraError, match="loads those inside a decoder layer as their module's lora_B"):
        lora.inspect_adapter("a", adapter)


def test_lora_serve_refuses_it_before_writing(tmp_path):
    adapter = _adapter(tmp_path, ATTENTION, {"base_model.model.lm_head.weight": [128, 64]})
    out = tmp_path / "bundle"
    result = invoke([*serve_args(adapter), "--out", str(out), "--json"])
    assert_clean_error(result, "no LoRA factor (base_model.model.lm_head.weight)")
    assert not out.exists()


def test_render_serve_refuses_it_naming_the_plan_key(tmp_path):
    adapter = _adapter(tmp_path, ATTENTION, {"base_model.model.lm_head.weight": [128, 64]})
    with pytest.raises(RenderError, match=r"^plan serve.lora.paths.e: .*no LoRA factor"):
        render_serve(current_plan({"e": adapter}), name="q", model_path="/m", weight_path="/w")


def test_lora_factors_are_accepted(tmp_path):
    # added-token embeddings (input_embeddings/output_embeddings): test_lora_review5_added_tokens
    adapter = _adapter(tmp_path, ATTENTION, EMBEDDING, targets=("q_proj", "embed_tokens"))
    assert lora.inspect_adapter("a", adapter).warnings == []


def test_the_base_weight_peft_saves_beside_embedding_lora_is_accepted(tmp_path):
    lm_head = {
        "base_model.model.lm_head.lora_A.weight": [4, 64],
        "base_model.model.lm_head.lora_B.weight": [128, 4],
    }
    base = {
        "base_model.model.model.embed_tokens.base_layer.weight": [128, 64],
        "base_model.model.lm_head.base_layer.weight": [128, 64],
    }
    targets = ("q_proj", "embed_tokens", "lm_head")
    adapter = _adapter(tmp_path / "with", ATTENTION, EMBEDDING, lm_head, base, targets=targets)
    assert lora.inspect_adapter("a", adapter).warnings == []
    # without LoRA on that module it is no frozen base of anything served: refused
    adapter = _adapter(tmp_path / "without", ATTENTION, EMBEDDING, base, targets=("q_proj", "embed_tokens"))
    with pytest.raises(
        lora.LoraError, match=r"no LoRA factor \(base_model.model.lm_head.base_layer.weight\)"
    ):
        lora.inspect_adapter("a", adapter)
