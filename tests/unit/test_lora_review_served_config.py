"""What SGLang reads of a PEFT adapter it serves as is (the current stack serves a plain PEFT adapter without
conversion). sglang-kt 0.7.2: srt/lora/lora_config.py reads hf_config["target_modules"], ["r"],
["lora_alpha"] and lora.py asserts hf_config["peft_type"] (a missing key stops the server at start);
lora_manager.py init_lora_shapes stops at start on a target_modules string (a PEFT regex, "all-linear")
unless --lora-target-modules is given, which ktinfra does not render; lora.py _process_weight loads
lora_A/lora_B (and LoRA on embed_tokens/lm_head) only, so PEFT's modules_to_save weights would be dropped.
Before, `ktinfra lora serve` accepted all of these and rendered a unit whose server could not start (or
served the model without its trained modules)."""

from __future__ import annotations

import json
import sys

import pytest
from safetensors_file import write_safetensors
from test_lora import H100, kt_dir, peft_dir, serve_args
from test_lora_cli_errors import assert_clean_error, invoke

from ktinfra import lora


def _edit(adapter, drop=(), **fields):
    path = adapter / "adapter_config.json"
    config = json.loads(path.read_text()) | fields
    for key in drop:
        config.pop(key)
    path.write_text(json.dumps(config))
    return adapter


def _serve(tmp_path, adapter, *extra):
    out = tmp_path / "bundle"
    return invoke([*serve_args(adapter), "--out", str(out), "--json", *extra]), out


@pytest.mark.parametrize("targets", [".*\\.(q_proj|v_proj)$", "all-linear"])
def test_target_modules_string_is_refused_with_the_list_the_tensors_name(tmp_path, targets):
    adapter = _edit(peft_dir(tmp_path / "a"), target_modules=targets)
    write_safetensors(
        adapter / "adapter_model.safetensors",
        {
            f"base_model.model.model.layers.0.self_attn.{module}.lora_{ab}.weight": [4, 64]
            for module in ("q_proj", "v_proj")
            for ab in "AB"
        },
    )
    result, out = _serve(tmp_path, adapter)
    assert_clean_error(result, f"target_modules is the string {targets!r}")
    assert '["q_proj", "v_proj"]' in result.output
    assert not out.exists()
    # the list the message names is served
    _edit(adapter, target_modules=["q_proj", "v_proj"])
    result, out = _serve(tmp_path, adapter)
    assert result.exit_code == 0, result.output
    assert (out / "plan-lora.json").is_file()


@pytest.mark.parametrize("key", ["lora_alpha", "target_modules", "peft_type"])
def test_a_key_sglang_reads_missing_is_refused(tmp_path, key):
    adapter = _edit(peft_dir(tmp_path / "a"), drop=[key])
    result, out = _serve(tmp_path, adapter, "--lora-alpha", "8")  # the adapter's own (if any): accepted
    assert_clean_error(result, f"adapter_config.json: no {key}; SGLang reads peft_type, r, lora_alpha")
    assert not out.exists()


def test_a_kt_output_without_lora_alpha_is_still_converted_with_lora_alpha(tmp_path):
    """kt-kernel's converter writes every key SGLang reads (and --lora-alpha where the input has none): the
    check is for adapters served as they are."""
    adapter = _edit(kt_dir(tmp_path / "kt", manifest=False), drop=["lora_alpha"])
    converter = tmp_path / "convert.py"
    converter.write_text("")
    run = ("--dry-run", "--converter", str(converter), "--converter-python", sys.executable)
    result, _ = _serve(tmp_path, adapter, *run)
    assert_clean_error(result, "no lora_alpha in adapter_config.json; pass --lora-alpha")
    result, _ = _serve(tmp_path, adapter, *run, "--lora-alpha", "16")
    assert result.exit_code == 0, result.output


_ATTENTION_LORA = {
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": [4, 64],
    "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": [64, 4],
}


@pytest.mark.parametrize("saved", [["embed_tokens", "lm_head"], "lm_head"])
def test_modules_to_save_is_refused(tmp_path, saved):
    adapter = _edit(peft_dir(tmp_path / "a"), modules_to_save=saved)
    write_safetensors(
        adapter / "adapter_model.safetensors",
        {**_ATTENTION_LORA, "base_model.model.lm_head.weight": [128, 64]},  # PEFT saves the module whole
    )
    with pytest.raises(lora.LoraError, match=r"modules_to_save .* is set; PEFT saved those modules"):
        lora.inspect_adapter("a", adapter)
    result, out = _serve(tmp_path, adapter)
    assert_clean_error(result, "export a merged model")
    assert not out.exists()
    for empty in (None, []):  # LLaMA-Factory writes null without additional_target
        _edit(adapter, modules_to_save=empty)  # the whole lm_head.weight is still dropped by SGLang
        with pytest.raises(lora.LoraError, match=r"no LoRA factor \(base_model.model.lm_head.weight\)"):
            lora.inspect_adapter("a", adapter)
    write_safetensors(adapter / "adapter_model.safetensors", {**_ATTENTION_LORA})
    assert lora.inspect_adapter("a", adapter).kind == "peft"


def _h100_plan(tmp_path) -> str:
    res = invoke(["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--json"])
    assert res.exit_code == 0, res.output
    path = tmp_path / "plan.json"
    path.write_text(res.stdout)
    return str(path)


def test_lora_plan_checks_a_plain_peft_adapter_it_can_read(tmp_path):
    """`ktinfra lora plan` takes adapters in SGLang's format; one readable here gets serve's checks."""
    plan = _h100_plan(tmp_path)
    adapter = _edit(peft_dir(tmp_path / "a"), target_modules=".*q_proj")
    result = invoke(["lora", "plan", "--plan", plan, "--adapter", f"mine={adapter}", "--json"])
    assert_clean_error(result, "target_modules is the string '.*q_proj'")
    _edit(adapter, target_modules=["q_proj"])
    assert invoke(["lora", "plan", "--plan", plan, "--adapter", f"mine={adapter}", "--json"]).exit_code == 0
    # an adapter not on this host is left to the host that serves it
    away = invoke(["lora", "plan", "--plan", plan, "--adapter", f"mine={tmp_path / 'elsewhere'}", "--json"])
    assert away.exit_code == 0, away.output


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"bias": "all"}, "bias 'all' is set"),
        ({"bias": "lora_only"}, "bias 'lora_only'"),
        ({"lora_bias": True}, "lora_bias is set"),
    ],
)
def test_trained_biases_are_refused(tmp_path, fields, message):
    """sglang-kt mem_pool.py load_lora_weight_to_buffer puts every tensor of a layer that is no lora_A into
    the lora_B buffer of the module its name matches (a q_proj.bias or lora_B.bias replaces the lora_B) and
    raises for a name no target module matches (bias 'all'): PEFT saves those biases in the adapter."""
    adapter = _edit(peft_dir(tmp_path / "a"), **fields)
    with pytest.raises(lora.LoraError, match=message):
        lora.inspect_adapter("a", adapter)
    result, out = _serve(tmp_path, adapter)
    assert_clean_error(result, "train with bias 'none'")
    assert not out.exists()
    _edit(adapter, bias="none", lora_bias=False)  # PEFT's defaults, as LLaMA-Factory writes them
    assert lora.inspect_adapter("a", adapter).kind == "peft"
