"""benchmarks/moe_threads.py, run for real as a subprocess: bad options are refused before the weights are
made (2.4 GB into /dev/shm) or a sweep is spent, every config's result (a failed one too) lands in --out, the
exit says when one failed, and a missing kt-kernel ends in one clear line, not a traceback.

The machine has no torch and no kt-kernel: a `torch` package on PYTHONPATH with only manual_seed lets the
parent get past make_weights (the weight files already exist, so it only seeds); each config's child then
fails for real at kt_kernel, which is the failed-run path under test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "moe_threads.py"


def run(tmp_path: Path, *args: str, stub_torch: bool = True) -> subprocess.CompletedProcess:
    stub = tmp_path / "stub"
    stub.mkdir(exist_ok=True)
    if stub_torch:
        (stub / "torch").mkdir(exist_ok=True)
        (stub / "torch" / "__init__.py").write_text("def manual_seed(seed):\n    pass\n")
    weights = tmp_path / "shm"
    weights.mkdir(exist_ok=True)
    for layer in range(2):  # the weights as an earlier run left them: make_weights skips them
        for matrix in ("gate", "up", "down"):
            (weights / f"layer{layer}_{matrix}.bf16").write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": str(stub), "KT_BENCH_WEIGHTS": str(weights)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--configs", "12"], "argument --configs: '12': not THREADSxPOOLS[+SPINNERS]"),
        (["--configs", "12x1,8xq"], "argument --configs: not a whole number: 'q'"),
        (["--configs", "12x0"], "argument --configs: must be 1 or more, not 0"),
        (["--configs", "2x4"], "2 threads in 4 pools: a pool would have no thread"),
        (["--threads", "0"], "argument --threads: must be 1 or more, not 0"),
        (["--threads", "2", "--pools", "3"], "2 threads in 3 pools: a pool would have no thread"),
        (["--numa-nodes", "0,x"], "argument --numa-nodes: not a whole number: 'x'"),
        (["--out", "/nonexistent-dir/t.json"], "--out /nonexistent-dir/t.json: not a file in an existing"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(tmp_path, args, message):
    out = [] if "--out" in args else ["--out", str(tmp_path / "t.json")]
    done = run(tmp_path, *out, *args, stub_torch=False)  # no torch: a run that started would show it
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert f"moe_threads.py: error: {message}" in done.stderr
    assert "Traceback" not in done.stderr and "FAILED" not in done.stdout
    assert not (tmp_path / "t.json").exists()


def test_every_failed_config_is_written_and_the_exit_says_so(tmp_path):
    out = tmp_path / "t.json"
    done = run(tmp_path, "--configs", "2x1,1x1+1", "--out", str(out))
    # both children fail (no kt_kernel here): before, --out was written only after a success, so these
    # failures were never written, and the script exited 0
    assert done.stdout.count("FAILED") == 2, done.stdout
    assert done.returncode == 1, done.stderr
    assert "2 of 2 configs failed" in done.stderr
    summary = json.loads(out.read_text())
    assert summary["layer"] == [128, 8, 2048, 768]
    assert [(c["threads"], c["pools"], c["spinners"]) for c in summary["configs"]] == [(2, 1, 0), (1, 1, 1)]
    for config in summary["configs"]:  # the child's reason, one line, not a traceback
        assert "error: moe_threads.py needs kt_kernel" in config["error"]
        assert "Traceback" not in config["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shm", "stub", "t.json"]  # no temporary file left


def test_a_missing_kt_kernel_or_torch_is_one_clear_line(tmp_path):
    out = tmp_path / "one.json"
    done = run(tmp_path, "--threads", "2", "--out", str(out))
    assert done.returncode == 1
    assert done.stderr.startswith(
        "error: moe_threads.py needs kt_kernel (kt-kernel's environment): No module"
    )
    assert "Traceback" not in done.stderr
    other = tmp_path / "no-torch"
    other.mkdir()
    out = other / "sweep.json"
    done = run(other, "--configs", "2x1", "--out", str(out), stub_torch=False)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("error: moe_threads.py needs torch")
    assert "Traceback" not in done.stderr and not out.exists()
