"""benchmarks/sft_vram.py, run for real as a subprocess: bad options are refused before the model is built
(before: an --out in a missing directory failed only after every GPU run, losing the report; '--seq 512,x',
an unknown model or a missing torch ended in a traceback; '--seq ,' and '--batch 0' ran nothing or 0 tokens).

The machine has no torch: a run that got past the options stops at the clear 'needs torch' line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sft_vram.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "Nope"], "argument --model: unknown model 'Nope'; known: DeepSeek-V2-Lite"),
        (["--seq", "512,x"], "argument --seq: not a number: 'x'"),
        (["--seq", "512,0"], "argument --seq: must be above 0, not 0"),
        (["--seq", ","], "argument --seq: no sequence length"),
        (["--batch", "0"], "argument --batch: must be above 0, not 0"),
        (["--rank", "-8"], "argument --rank: must be above 0, not -8"),
        (["--out", "/nonexistent-dir/v.json"], "--out /nonexistent-dir/v.json: not a file in an existing"),
    ],
)
def test_bad_options_are_refused_before_the_model_is_built(tmp_path, args, message):
    model = [] if "--model" in args else ["--model", "Qwen3-30B-A3B"]
    done = run(*model, "--tiny", "--device", "cpu", *args)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert f"sft_vram.py: error: {message}" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_missing_torch_is_one_clear_line(tmp_path):
    done = run("--model", "Qwen3-30B-A3B", "--tiny", "--device", "cpu", "--out", str(tmp_path / "v.json"))
    assert done.returncode == 1 and done.stdout == ""
    assert (
        done.stderr
        == "error: sft_vram.py needs torch (torch, transformers >= 5, peft): No module named 'torch'\n"
    )
    assert list(tmp_path.iterdir()) == []
