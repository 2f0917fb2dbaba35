"""adapter_config.json against the tensors of adapter_model.safetensors, for the vocabulary-sized modules.

A KT-converted (merged) adapter whose target_modules omitted embed_tokens while its tensors held
embed_tokens LoRA passed `lora plan` (exit 0), with csgmv too: sglang-kt 0.7.2 takes a merged KT adapter's
targets from its tensors (server_args.py _prepare_kt_composite_lora_adapter), so it wraps embed_tokens on a
backend that cannot run it, while ktinfra's backend check read target_modules. A plain adapter with the same
mismatch is served without those tensors (srt/lora/lora.py _process_weight skips a module target_modules does
not name). Both are now refused; the reverse (target_modules naming embed_tokens, no tensor for it) is warned
about; tensors saved whole without modules_to_save are refused (4e64a37: SGLang drops them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors_file import write_safetensors
from test_lora import kt_dir, merged_kt_dir, peft_dir, serve_args
from test_lora_cli_errors import assert_clean_error, invoke
from test_lora_review_embedding_backend import _plan

from ktinfra import lora

ATTENTION = {
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": [4, 64],
    "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": [64, 4],
}
EXPERT = {
    "base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_A.weight": [4, 64],
    "base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_B.weight": [32, 4],
}
# PEFT's names for an nn.Embedding's LoRA (lora.Embedding: lora_embedding_A [r, vocab], _B [hidden, r])
EMBEDDING = {
    "base_model.model.model.embed_tokens.lora_embedding_A": [4, 128],
    "base_model.model.model.embed_tokens.lora_embedding_B": [64, 4],
}
LM_HEAD = {
    "base_model.model.lm_head.lora_A.weight": [4, 64],
    "base_model.model.lm_head.lora_B.weight": [128, 4],
}


def _targets(adapter: Path, targets: list[str]) -> Path:
    path = adapter / "adapter_config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"target_modules": targets}))
    return adapter


def _tensors(adapter: Path, *groups: dict) -> Path:
    write_safetensors(adapter / "adapter_model.safetensors", {k: v for g in groups for k, v in g.items()})
    return adapter


def test_merged_kt_adapter_with_embedding_lora_its_config_omits_is_refused_by_lora_plan(tmp_path):
    adapter = _tensors(merged_kt_dir(tmp_path / "kt"), ATTENTION, EXPERT, EMBEDDING)
    _targets(adapter, ["q_proj", "gate_proj"])
    for backend in ("triton", "csgmv"):
        args = ["lora", "plan", "--plan", _plan(tmp_path), "--adapter", f"kt={adapter}"]
        result = invoke([*args, "--lora-backend", backend, "--json"])
        assert_clean_error(result, 'target_modules ["q_proj", "gate_proj"] does not name embed_tokens')
        assert "embed_tokens.lora_embedding_A" in result.output and "add 'embed_tokens'" in result.output


def test_kt_training_output_is_refused_before_converting(tmp_path):
    adapter = _tensors(kt_dir(tmp_path / "kt", manifest=False), ATTENTION, EMBEDDING)
    out = tmp_path / "bundle"
    result = invoke([*serve_args(adapter), "--out", str(out), "--json"])
    assert_clean_error(result, "does not name embed_tokens")
    assert not out.exists() and not (tmp_path / "kt_sglang").exists()


def test_plain_adapter_with_lm_head_lora_its_config_omits_is_refused(tmp_path):
    adapter = _tensors(peft_dir(tmp_path / "a"), ATTENTION, LM_HEAD)
    said = r"does not name lm_head, .* \(base_model\.model\.lm_head\.lora_A\.weight\)"
    with pytest.raises(lora.LoraError, match=said):
        lora.inspect_adapter("a", adapter)


def test_a_config_naming_embed_tokens_without_its_tensors_is_warned_about(tmp_path):
    adapter = _targets(peft_dir(tmp_path / "a"), ["q_proj", "v_proj", "model.embed_tokens"])
    result = invoke([*serve_args(adapter), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["adapters"][0]["warnings"]
    said = "names 'model.embed_tokens', but adapter_model.safetensors holds no LoRA for embed_tokens"
    assert any(said in w for w in warnings), warnings


def test_tensors_saved_whole_without_modules_to_save_are_refused(tmp_path):
    adapter = _tensors(peft_dir(tmp_path / "a"), ATTENTION, {"base_model.model.lm_head.weight": [128, 64]})
    with pytest.raises(lora.LoraError, match=r"no LoRA factor \(base_model.model.lm_head.weight\)"):
        lora.inspect_adapter("a", adapter)


def test_config_and_tensors_that_agree_are_accepted(tmp_path):
    adapter = _tensors(peft_dir(tmp_path / "a"), ATTENTION, EMBEDDING, LM_HEAD)
    _targets(adapter, ["q_proj", "embed_tokens", "lm_head"])
    assert lora.inspect_adapter("a", adapter).warnings == []
    merged = _tensors(merged_kt_dir(tmp_path / "kt"), ATTENTION, EXPERT, EMBEDDING)
    _targets(merged, ["q_proj", "gate_proj", "embed_tokens"])
    args = ["lora", "plan", "--plan", _plan(tmp_path), "--adapter", f"kt={merged}", "--json"]
    assert invoke(args).exit_code == 0
