"""`lora serve --legacy` with a kt-kernel KT training output: the legacy stack's sglang fork (0.4.x) has no
KT expert LoRA, and its convert_lora.py copies fused_expert_lora.safetensors into the output as it is, where
the fork's LoRA loader reads its layers.N.experts.*_lora_* tensors as weights of layer N (srt/lora/lora.py
initialize_weights): the expert LoRA is not served. Before, it was converted and the unit rendered."""

from __future__ import annotations

from test_lora import kt_dir, serve_args
from typer.testing import CliRunner

from ktinfra.cli import app


def test_a_kt_output_is_refused_on_the_legacy_stack_before_converting(tmp_path):
    adapter = kt_dir(tmp_path / "kt")
    converter = tmp_path / "convert_lora.py"
    converter.write_text("")
    out = tmp_path / "conv"
    args = serve_args(adapter, "--legacy", "--converter", str(converter), "--converter-python", "true")
    res = CliRunner().invoke(app, [*args, "--output-dir", str(out), "--out", str(tmp_path / "bundle")])
    assert res.exit_code == 1, res.output
    said = f"error: adapter mine: {adapter.resolve()} holds kt-kernel's fused expert LoRA"
    assert res.stderr.startswith(said), res.stderr
    assert "without --legacy" in res.stderr
    assert not out.exists() and not (tmp_path / "bundle").exists()
