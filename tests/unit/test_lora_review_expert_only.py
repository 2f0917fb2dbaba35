"""An adapter whose LoRA sits on the routed experts only: sglang-kt splits a merged KT adapter into expert and
non-expert parts at start and refuses one without non-expert tensors (server_args.py
_prepare_kt_composite_lora_adapter: "contains expert tensors but no non-expert tensors. This is an
expert-only adapter: pass it with --kt-expert-lora-path together with --kt-weight-path, not through
--lora-paths"). kt-kernel's converter makes exactly that from a KT output without
adapter_model.safetensors."""

from __future__ import annotations

import json

from safetensors_file import write_safetensors
from test_lora import fused_shapes, serve_args
from typer.testing import CliRunner

from ktinfra.cli import app


def test_kt_output_with_only_expert_lora_is_refused_before_converting(tmp_path):
    adapter = tmp_path / "kt"
    adapter.mkdir()
    config = {"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["gate_proj"]}
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    write_safetensors(adapter / "fused_expert_lora.safetensors", fused_shapes())
    out = tmp_path / "conv"
    converter = ["--converter", "/bin/true", "--converter-python", "sh"]
    args = serve_args(adapter, "--output-dir", str(out), *converter)
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "bundle")])
    assert res.exit_code == 1, res.output
    assert res.stderr.startswith("error: adapter mine has LoRA on the routed experts only")
    assert "no non-expert tensors" in res.stderr
    assert "it takes one only as --kt-expert-lora-path, which ktinfra does not render" in res.stderr
    assert not out.exists() and not (tmp_path / "bundle").exists()


def test_a_merged_adapter_of_expert_lora_only_is_refused_by_lora_plan(tmp_path):
    merged = tmp_path / "merged"
    merged.mkdir()
    config = {"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["gate_proj"]}
    (merged / "adapter_config.json").write_text(json.dumps(config))
    write_safetensors(
        merged / "adapter_model.safetensors",
        {
            "model.layers.0.mlp.experts.0.gate_proj.lora_A.weight": [4, 64],
            "model.layers.0.mlp.experts.0.gate_proj.lora_B.weight": [32, 4],
        },
    )
    plan = tmp_path / "plan.json"
    planned = ["plan", "--model", "Qwen3-30B-A3B", "--from", str(serve_args(merged)[-1]), "--json"]
    plan.write_text(CliRunner().invoke(app, planned).stdout)
    res = CliRunner().invoke(app, ["lora", "plan", "--plan", str(plan), "--adapter", f"m={merged}"])
    assert res.exit_code == 1, res.output
    assert res.stderr.startswith("error: adapter m has LoRA on the routed experts only")
