"""benchmarks/moe_concurrency.py, run for real as a subprocess: bad options are refused before any weights are
made or runs are spent, and every run's result (a failed one too) lands in --out, whole.

The machine has no torch and no kt-kernel: a `torch` package on PYTHONPATH with only manual_seed lets the
parent get past make_weights (the weight files already exist, so it only seeds); each `--one` child then
fails for real at `import kt_kernel`, which is the failed-run path under test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "moe_concurrency.py"
SHAPE = "qwen3-30b-a3b"


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    stub = tmp_path / "stub"
    (stub / "torch").mkdir(parents=True, exist_ok=True)
    (stub / "torch" / "__init__.py").write_text("def manual_seed(seed):\n    pass\n")
    weights = tmp_path / "shm"
    for layer in range(2):  # the shape's weight files, as an earlier run left them: make_weights skips them
        for matrix in ("gate", "up", "down"):
            path = weights / SHAPE / f"layer{layer}_{matrix}.bf16"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": str(stub), "KT_BENCH_WEIGHTS": str(weights)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "14,x"], "argument --threads: not a number: 'x'"),
        (["--threads", "0"], "argument --threads: must be above 0, not 0"),
        (
            ["--shapes", "qwen3"],
            "argument --shapes: unknown shape 'qwen3' (known: qwen3-30b-a3b, deepseek-v3)",
        ),
        (
            ["--out", "/nonexistent-dir/moe.json"],
            "--out /nonexistent-dir/moe.json: not a file in an existing",
        ),
    ],
)
def test_bad_options_are_refused_before_any_run(tmp_path, args, message):
    out = [] if "--out" in args else ["--out", str(tmp_path / "moe.json")]
    done = run(tmp_path, "--shapes", SHAPE, *out, *args)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert f"moe_concurrency.py: error: {message}" in done.stderr
    assert "Traceback" not in done.stderr and "FAILED" not in done.stdout
    assert "weights ready" not in done.stdout  # nothing was started
    assert not (tmp_path / "moe.json").exists()


def test_every_failed_run_is_written_and_the_exit_says_so(tmp_path):
    out = tmp_path / "moe.json"
    done = run(tmp_path, "--shapes", SHAPE, "--threads", "2,1", "--out", str(out))
    # both children fail (no kt_kernel here): before, --out was written only after a success, so these
    # failures were never written, and the script exited 0
    assert done.stdout.count("FAILED") == 2, done.stdout
    assert done.returncode == 1, done.stderr
    assert "2 of 2 runs failed" in done.stderr
    results = json.loads(out.read_text())["results"]
    assert [(r["shape"], r["threads"]) for r in results] == [(SHAPE, 2), (SHAPE, 1)]
    assert all("kt_kernel" in r["error"] for r in results)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["moe.json", "shm", "stub"]  # no temporary file left
    assert not list((tmp_path / "shm" / SHAPE).iterdir())  # the shape's weights removed after its runs


def test_a_results_write_that_fails_part_way_leaves_the_earlier_results(tmp_path):
    # a file size limit (as a full disk) stops the write part way: write_json, which both scripts now write
    # --out with, leaves the earlier results whole and no temporary file (write_text cut them off)
    out = tmp_path / "moe.json"
    out.write_text('{"results": []}')
    code = (
        "import resource, signal, sys\n"
        f"sys.path.insert(0, {str(SCRIPT.parent)!r})\n"
        "from pathlib import Path\n"
        "from stream import write_json\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        f"write_json(Path({str(out)!r}), {{'results': ['x' * 100] * 1000}})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "File too large" in done.stderr, done.stderr
    assert out.read_text() == '{"results": []}'
    assert [p.name for p in tmp_path.iterdir()] == ["moe.json"]


def test_a_child_without_kt_kernel_fails_in_one_line(tmp_path):
    """Before: each child's error in --out was import kt_kernel's traceback; now the one line moe_threads'
    need() gives (a parent without torch stops at once, before any weights, the same way)."""
    out = tmp_path / "moe.json"
    run(tmp_path, "--shapes", SHAPE, "--threads", "1", "--out", str(out))
    [result] = json.loads(out.read_text())["results"]
    assert result["error"].strip() == (
        "error: moe_concurrency.py needs kt_kernel (kt-kernel's environment): No module named 'kt_kernel'"
    )
    bare = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "x.json")], capture_output=True, text=True
    )
    assert bare.returncode == 1 and bare.stderr.startswith("error: moe_concurrency.py needs torch")
