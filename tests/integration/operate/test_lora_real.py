"""LoRA pipeline on a real PEFT adapter saved from the tiny model; the chat check against a real server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from ktinfra import lora
from ktinfra.cli import app

H100 = Path(__file__).resolve().parents[2] / "fixtures" / "hosts" / "h100-xeon-amx-16c"


def test_real_peft_adapter_is_valid(tiny_lora, tiny_model):
    adapter = lora.inspect_adapter("tiny", tiny_lora, base=str(tiny_model))
    assert (adapter.kind, adapter.rank, adapter.alpha) == ("peft", 4, 8)
    assert sorted(adapter.target_modules) == ["k_proj", "o_proj", "q_proj", "v_proj"]
    assert adapter.tensors == 2 * 4 * 2  # layers x modules x (A, B)
    assert adapter.warnings == []


def test_serve_renders_plan_and_unit_for_real_adapter(tiny_lora, tiny_model, tmp_path):
    bundle = tmp_path / "bundle"
    res = CliRunner().invoke(
        app,
        [
            "lora", "serve", "--base", str(tiny_model), "--adapter", f"tiny={tiny_lora}",
            "--model", "Qwen3-30B-A3B", "--from", str(H100), "--name", "tiny", "--port", "30001",
            "--max-loras-per-batch", "2", "--out", str(bundle), "--json",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["conversions"] == []  # a plain PEFT adapter is served as is on the current stack
    plan = json.loads((bundle / "plan-lora.json").read_text())
    assert plan["serve"]["kt_num_gpu_experts"] == 0
    assert plan["serve"]["lora"]["paths"] == {"tiny": str(tiny_lora)}
    env = (bundle / "ktinfra-serve-tiny.env").read_text()
    assert f"--enable-lora --lora-paths tiny={tiny_lora} --max-loras-per-batch 2 --lora-backend triton" in env
    assert "--kt-num-gpu-experts 0" in env and "--port 30001" in env and f"--model {tiny_model}" in env


def test_truncated_real_adapter_is_rejected_and_nothing_written(tiny_lora, tiny_model, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_lora, broken)
    weights = broken / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:6])
    bundle = tmp_path / "bundle"
    res = CliRunner().invoke(
        app,
        [
            "lora", "serve", "--base", str(tiny_model), "--adapter", f"b={broken}",
            "--model", "Qwen3-30B-A3B", "--from", str(H100), "--out", str(bundle),
        ],
    )  # fmt: skip
    assert res.exit_code == 1
    assert "not a readable safetensors file" in res.output
    assert not bundle.exists()


def test_chat_check_against_real_server(tiny_server, tiny_model):
    res = CliRunner().invoke(
        app,
        [
            "lora",
            "check",
            "--url",
            tiny_server.url,
            "--model",
            str(tiny_model),
            "--max-tokens",
            "8",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["ok"] and result["reply"] and result["completion_tokens"] == 8


def test_chat_check_reports_unknown_adapter(tiny_server, tiny_model):
    # transformers serve has no LoRA routing: `model:adapter` is refused, and the check must say so
    result = lora.chat_check(tiny_server.url, str(tiny_model), adapter="tiny", max_tokens=4)
    assert not result["ok"]
    assert result["request"]["model"] == f"{tiny_model}:tiny"
    assert result["status"] == 400
