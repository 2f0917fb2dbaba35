"""An adapter served as it is with a non-empty added_tokens.json.

sglang-kt counts the entries of the adapter's added_tokens.json (srt/lora/lora_config.py) and refuses the
adapter at start when there is one (lora_manager.py validate_new_adapter: 'LoRA serving currently doesn't
support adapters that add tokens to the vocabulary'), whatever its tensors hold. LLaMA-Factory saves the
tokenizer beside the adapter, and Qwen's tokenizer writes its special tokens there; lora serve, lora plan
and render serve passed such an adapter with exit 0. It is now refused on the current stack, before anything
is written; the legacy fork has no such check, and kt-kernel's converter writes no tokenizer files."""

from __future__ import annotations

import json

import pytest
from test_lora import kt_dir, peft_dir, serve_args
from test_lora_cli_errors import assert_clean_error, invoke
from test_lora_review2_render_backend import lora_plan
from test_lora_review4_render_planned import current_plan

from ktinfra import lora
from ktinfra.render import RenderError, render_serve

QWEN_SPECIAL = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}


def _with_tokens(root, content: str):
    adapter = peft_dir(root)
    (adapter / "added_tokens.json").write_text(content)
    return adapter


def test_lora_serve_refuses_it_before_writing(tmp_path):
    adapter = _with_tokens(tmp_path / "a", json.dumps(QWEN_SPECIAL))
    out = tmp_path / "bundle"
    result = invoke([*serve_args(adapter), "--out", str(out), "--json"])
    assert_clean_error(result, "added_tokens.json: lists tokens added to the tokenizer (<|endoftext|> 151643")
    assert "doesn't support adapters that add tokens to the vocabulary" in result.output
    assert not out.exists()


def test_render_serve_refuses_it_naming_the_plan_key(tmp_path):
    adapter = _with_tokens(tmp_path / "a", json.dumps(QWEN_SPECIAL))
    with pytest.raises(RenderError, match=r"^plan serve.lora.paths.e: .*added_tokens.json: lists tokens"):
        render_serve(current_plan({"e": adapter}), name="q", model_path="/m", weight_path="/w")


def test_the_legacy_fork_has_no_such_check(tmp_path):
    adapter = _with_tokens(tmp_path / "a", json.dumps(QWEN_SPECIAL))
    plan = lora_plan({"e": adapter})  # the seed002 fixture is a legacy-stack plan
    assert f"e={adapter}" in render_serve(plan, name="q", model_path="/m", weight_path="/w").info["argv"]


@pytest.mark.parametrize("content", ["{}", "[]", "not json"], ids=["empty", "empty-list", "malformed"])
def test_what_sglang_counts_as_no_token_passes(tmp_path, content):
    """An empty file counts 0; malformed JSON is logged by SGLang and counted as none."""
    adapter = _with_tokens(tmp_path / "a", content)
    lora.check_served_as_is(lora.inspect_adapter("a", adapter))


def test_a_kt_training_output_is_converted_without_it(tmp_path):
    """kt-kernel's converter writes adapter_config.json and the tensors only: the file stays behind."""
    adapter = kt_dir(tmp_path / "kt")
    (adapter / "added_tokens.json").write_text(json.dumps(QWEN_SPECIAL))
    converter = tmp_path / "c.py"
    converter.write_text("")
    result = invoke(serve_args(adapter, "--converter", str(converter), "--dry-run", "--json"))
    assert result.exit_code == 0, result.output
