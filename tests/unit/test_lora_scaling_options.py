"""PEFT options SGLang does not serve. sglang-kt 0.7.2's srt/lora/lora.py reads r and lora_alpha from
adapter_config.json and scales every module by lora_alpha / r over lora_A/lora_B; use_dora's magnitude
vectors, use_rslora's lora_alpha / sqrt(r) and per-module rank_pattern/alpha_pattern are not read, so such an
adapter would be served as another model with no error. ktinfra refuses it before anything is written."""

from __future__ import annotations

import json
import math

import pytest
from test_lora import peft_dir, serve_args
from test_lora_cli_errors import assert_clean_error, invoke

from ktinfra import lora


def _with(adapter, **fields):
    path = adapter / "adapter_config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | fields))
    return adapter


def _serve_dry(tmp_path, adapter):
    out = tmp_path / "out"
    return invoke([*serve_args(adapter), "--output-dir", str(out), "--dry-run", "--json"]), out


def test_dora_is_refused_before_anything_is_written(tmp_path):
    adapter = _with(peft_dir(tmp_path / "a"), use_dora=True)
    result, out = _serve_dry(tmp_path, adapter)
    assert_clean_error(result, "use_dora is set; SGLang serves the lora_A/lora_B delta only")
    assert not out.exists()


def test_rslora_is_refused_with_the_lora_alpha_that_scales_the_same(tmp_path):
    adapter = _with(peft_dir(tmp_path / "a", rank=16, alpha=32), use_rslora=True)
    with pytest.raises(lora.LoraError) as caught:
        lora.inspect_adapter("a", adapter)
    message = str(caught.value)
    assert "lora_alpha/sqrt(r) = 8, SGLang by lora_alpha/r = 2" in message
    assert "use_rslora false and lora_alpha 128" in message
    # the copy the message asks for is served, with the scaling rsLoRA trained
    _with(adapter, use_rslora=False, lora_alpha=128)
    served = lora.inspect_adapter("a", adapter)
    assert served.alpha / served.rank == pytest.approx(32 / math.sqrt(16))


def test_rslora_without_lora_alpha_uses_peft_default(tmp_path):
    adapter = _with(peft_dir(tmp_path / "a", rank=4, alpha=None), use_rslora=True)
    with pytest.raises(lora.LoraError, match="lora_alpha 16 "):  # 8 * sqrt(4)
        lora.inspect_adapter("a", adapter)


@pytest.mark.parametrize(
    ("key", "pattern", "message"),
    [
        ("alpha_pattern", {"v_proj": 32}, "alpha_pattern gives 'v_proj' 32 instead of 8"),
        ("rank_pattern", {"q_proj": 4, "v_proj": 16}, "rank_pattern gives 'v_proj' 16 instead of 4"),
        ("rank_pattern", ["v_proj"], "rank_pattern must be a JSON object"),
    ],
)
def test_per_module_rank_or_alpha_is_refused(tmp_path, key, pattern, message):
    adapter = _with(peft_dir(tmp_path / "a", rank=4, alpha=8), **{key: pattern})
    result, out = _serve_dry(tmp_path, adapter)
    assert_clean_error(result, message)
    assert not out.exists()


def test_peft_defaults_and_patterns_equal_to_r_and_alpha_are_served(tmp_path):
    """PEFT writes use_dora/use_rslora false and empty patterns into every adapter_config.json."""
    adapter = _with(
        peft_dir(tmp_path / "a", rank=4, alpha=8),
        use_dora=False,
        use_rslora=False,
        rank_pattern={"q_proj": 4},
        alpha_pattern={},
    )
    result, _ = _serve_dry(tmp_path, adapter)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["adapters"][0]["rank"] == 4
