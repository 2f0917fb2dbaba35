"""benchmarks/sft_vram.py's wiring, run for real on the CPU with shrunken widths (torch, transformers and
peft from the serve venv): the measurement on the H100 (docs/results/2026-11-22-h100-sft-vram) is only as
good as the model it builds. Nothing is measured here."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

import sft_vram  # noqa: E402

from ktinfra import sizing  # noqa: E402


@pytest.mark.parametrize("model", ["Qwen3-30B-A3B", "DeepSeek-V2-Lite"])
def test_tiny_run_builds_the_gpu_part_with_lora_where_the_model_counts_it(serve_python, tmp_path, model):
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [
            str(serve_python),
            str(ROOT / "benchmarks" / "sft_vram.py"),
            "--model",
            model,
            "--tiny",
            "--device",
            "cpu",
            "--seq",
            "16,32",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    config, arch = sft_vram.catalog_config(model, tiny=True)
    # every MoE layer's experts left the GPU; dense layers (DeepSeek's first) kept their MLP
    assert report["expert_blocks_on_cpu"] == arch.num_moe_layers > 0
    # parameters on the "GPU": the non-expert weights the model counts, plus norms, plus the LoRA
    norms = report["gpu_params"] - report["trainable_params"] - arch.non_expert_params
    assert 0 <= norms < 0.02 * arch.non_expert_params
    routers = report["lora_rank"] * (arch.hidden_size + arch.num_experts) * arch.num_moe_layers
    assert report["trainable_params"] == sizing.lora_params_gpu(arch, report["lora_rank"]) + routers
    # random weights: the loss starts near ln(vocab) and both steps ran at both lengths
    assert [run["seq"] for run in report["runs"]] == [16, 32]
    for run in report["runs"]:
        assert all(abs(loss - math.log(config["vocab_size"])) < 1.0 for loss in run["loss"]), run["loss"]
        assert "peak_allocated_bytes" not in run  # a CPU run measures nothing
