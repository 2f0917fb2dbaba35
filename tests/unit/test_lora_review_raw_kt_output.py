"""`ktinfra lora plan` and `ktinfra plan --lora` put adapters on --lora-paths as they are. A KT training
output (fused_expert_lora.safetensors, compact, beside PEFT's attention LoRA) is no such adapter: sglang-kt
0.7.2 refuses it at start (server_args.py _prepare_kt_composite_lora_adapter: "--lora-paths received raw KT
training adapter ... Convert the training artifact before serving"). Before, both planned it."""

from __future__ import annotations

import json

import pytest
from test_lora import H100, kt_dir, merged_kt_dir
from typer.testing import CliRunner

from ktinfra.cli import app


def _plan(tmp_path) -> str:
    res = CliRunner().invoke(app, ["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--json"])
    path = tmp_path / "plan.json"
    path.write_text(res.stdout)
    return str(path)


@pytest.mark.parametrize("peft_weights", [True, False])
def test_lora_plan_refuses_a_kt_training_output(tmp_path, peft_weights):
    raw = kt_dir(tmp_path / "kt")
    if not peft_weights:
        (raw / "adapter_model.safetensors").unlink()
        (raw / "kt_adapter_manifest.json").unlink()
    res = CliRunner().invoke(app, ["lora", "plan", "--plan", _plan(tmp_path), "--adapter", f"kt={raw}"])
    assert res.exit_code == 1, res.output
    assert res.stderr.startswith(f"error: adapter kt: {raw} is a KT training output")
    assert "ktinfra lora serve" in res.stderr


def test_plan_lora_refuses_a_kt_training_output(tmp_path):
    raw = kt_dir(tmp_path / "kt")
    args = ["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--json", "--lora", f"kt={raw}"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code != 0 and "is a KT training output" in res.output, res.output


def test_the_converted_adapter_is_planned(tmp_path):
    merged = merged_kt_dir(tmp_path / "merged")
    args = ["lora", "plan", "--plan", _plan(tmp_path), "--adapter", f"kt={merged}", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["serve"]["lora"]["paths"] == {"kt": str(merged)}
