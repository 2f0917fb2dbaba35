"""benchmarks/analyze.py, run for real as a subprocess, on a moe_threads.py result made by the real script
(every config failed: no kt-kernel here) and on the recorded H100 results in docs/results.

Before, a result of failed configs only (moe_threads.py now writes each failure as it comes) and a missing
file ended in a traceback (StopIteration, FileNotFoundError); now one line names the file and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "docs" / "results" / "2026-11-21-h100-amx"
sys.path.insert(0, str(Path(__file__).parent))
from test_bench_review3_moe_threads import run as run_moe_threads  # noqa: E402


def analyze(*args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "analyze.py"),
        "--plan-threads",
        "16",
        "--plan-pools",
        "1",
    ]
    return subprocess.run([*cmd, "--logical", "16", *args], capture_output=True, text=True, timeout=60)


def test_a_result_of_failed_configs_only_is_one_clear_line(tmp_path):
    moe = tmp_path / "moe_threads.json"
    made = run_moe_threads(tmp_path, "--configs", "2x1", "--out", str(moe))
    assert made.returncode == 1 and moe.exists(), made.stderr
    done = analyze("--moe", str(moe), "--stream", str(RECORDED / "stream.json"))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(
        f"error: --moe {moe}: none of its 1 configs ran (error: moe_threads.py needs"
    )
    assert "Traceback" not in done.stderr
    done = analyze("--moe", str(RECORDED / "moe_threads.json"), "--stream", str(RECORDED / "stream.json"),
                   "--extra", str(moe))  # fmt: skip
    assert done.returncode == 1 and done.stderr.startswith(f"error: --extra {moe}: none of its 1 configs ran")


def test_a_missing_or_foreign_file_is_one_clear_line(tmp_path):
    done = analyze("--moe", str(tmp_path / "nope.json"), "--stream", str(RECORDED / "stream.json"))
    assert (done.returncode, done.stderr) == (
        1,
        f"error: --moe {tmp_path / 'nope.json'}: No such file or directory\n",
    )
    done = analyze("--moe", str(RECORDED / "moe_threads.json"), "--stream", str(tmp_path / "nope.json"))
    assert (done.returncode, done.stderr) == (
        1,
        f"error: --stream {tmp_path / 'nope.json'}: No such file or directory\n",
    )
    done = analyze("--moe", str(RECORDED / "stream.json"), "--stream", str(RECORDED / "stream.json"))
    assert done.returncode == 1
    assert done.stderr.endswith("stream.json: not a moe_threads.py result (no 'configs' list)\n")


def test_the_recorded_results_still_read():
    done = analyze(
        "--moe", str(RECORDED / "moe_threads.json"), "--stream", str(RECORDED / "stream.json"),
        "--extra", str(RECORDED / "moe_headroom.json"), "--extra", str(RECORDED / "moe_repeat.json"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| 15 | 1 | 0 | 0.06 | 1,761 | 1,884 |" in done.stdout  # the README's best decode config
    assert "| 1 | (15, 1) | 1,761 | 7% | 88% |" in done.stdout
    assert "### moe_headroom.json" in done.stdout
