"""--lora-alpha where the adapter has its own lora_alpha: kt-kernel's converter keeps the input's own
(convert_kt_to_sglang_adapter.py _build_adapter_config reads config["lora_alpha"] first), SGLang serves a
plain PEFT adapter's as it is, and the legacy convert_lora.py takes no alpha. `lora serve --lora-alpha 16`
with an adapter of lora_alpha 8 converted and served 8 (scaling 2, not 4) with exit 0. The flag fills in a
missing lora_alpha only (as its help says); one that would be dropped is refused."""

from __future__ import annotations

import json
import sys

import pytest
from test_lora import kt_dir, peft_dir, serve_args
from test_lora_cli_errors import assert_clean_error, invoke

IGNORED = "adapter_config.json has lora_alpha 8, which is what gets served"


def _serve(tmp_path, adapter, *extra):
    converter = tmp_path / "convert.py"
    converter.write_text("")
    args = serve_args(adapter, "--converter", str(converter), "--converter-python", sys.executable, *extra)
    out = tmp_path / "conv"
    return invoke([*args, "--output-dir", str(out), "--dry-run", "--json"]), out


@pytest.mark.parametrize("make", [kt_dir, peft_dir], ids=["kt-output", "peft"])
def test_lora_serve_refuses_a_lora_alpha_the_adapter_overrides(tmp_path, make):
    adapter = make(tmp_path / "a")  # lora_alpha 8
    result, out = _serve(tmp_path, adapter, "--lora-alpha", "16")
    assert_clean_error(result, f"adapter mine: its {IGNORED}")
    assert "--lora-alpha 16 only fills in a missing one and would be ignored" in result.output
    assert not out.exists()


def test_the_adapters_own_value_or_a_missing_one_is_accepted(tmp_path):
    result, _ = _serve(tmp_path, kt_dir(tmp_path / "a"), "--lora-alpha", "8")
    assert result.exit_code == 0, result.output
    no_alpha = kt_dir(tmp_path / "b", manifest=False)
    config = json.loads((no_alpha / "adapter_config.json").read_text())
    del config["lora_alpha"]
    (no_alpha / "adapter_config.json").write_text(json.dumps(config))
    result, _ = _serve(tmp_path, no_alpha, "--lora-alpha", "16")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["conversions"][0]["command"][-2:] == ["--lora-alpha", "16"]


def test_lora_serve_refuses_lora_alpha_on_the_legacy_stack(tmp_path):
    adapter = peft_dir(tmp_path / "a", alpha=None)
    result, out = _serve(tmp_path, adapter, "--legacy", "--lora-alpha", "16")
    assert_clean_error(result, "--lora-alpha applies to kt-kernel's converter only")
    assert not out.exists()
