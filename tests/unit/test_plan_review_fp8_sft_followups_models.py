"""`ktinfra models` showed one SFT row, sft:BF16, for every model; a model that ships FP8 (DeepSeek-V3,
Kimi-K2) can also fine-tune on its FP8 experts (`ktinfra plan --mode sft --expert-format fp8`, 883f944),
which needs about half the RAM and no BF16 copy on disk: it gets an sft:FP8 row."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ktinfra import catalog, sizing
from ktinfra.cli import app


def test_models_table_has_an_sft_fp8_row_for_fp8_models_only():
    for arch in catalog.list_models():
        rows = sizing.table(arch)
        assert "sft:BF16" in rows
        if arch.native_dtype == "fp8":
            assert rows["sft:FP8"] == sizing.sft(arch, expert_dtype="fp8").to_dict()
        else:
            assert "sft:FP8" not in rows


def test_models_json_and_table_show_sft_fp8():
    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(app, ["models", "--json"]).output)}
    v3 = rows["DeepSeek-V3"]["sizing"]
    assert v3["sft:FP8"]["ram_bytes"] < v3["sft:BF16"]["ram_bytes"]
    assert v3["sft:FP8"]["breakdown"]["bf16_conversion"] == 0
    assert "sft:FP8" not in rows["Qwen3-30B-A3B"]["sizing"]
