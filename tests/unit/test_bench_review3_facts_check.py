"""benchmarks/facts_check.py, run for real as a subprocess (it runs the real `ktinfra facts --from`).

Before, a capture folder ktinfra refused ended in a CalledProcessError traceback that dropped ktinfra's
reason (its stderr was captured and thrown away), and a missing --facts / --kt-doctor file in a traceback;
now one line says which file and why, exit 1. The recorded H100 check still runs to its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "docs" / "results" / "2026-11-21-h100-amx"


def check(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "facts_check.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_capture_ktinfra_refuses_gives_ktinfra_s_reason(tmp_path):
    missing = tmp_path / "no-capture"
    done = check("--facts", str(RECORDED / "facts-live.json"), "--kt-doctor", str(RECORDED / "kt-doctor.txt"),
                 "--capture", str(missing))  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    reason = f"ktinfra facts --from failed: error: capture folder not found: {missing}"
    assert done.stderr == f"error: --capture {missing}: {reason}\n"


def test_a_missing_input_file_is_one_clear_line(tmp_path):
    done = check("--facts", str(tmp_path / "f.json"), "--kt-doctor", str(RECORDED / "kt-doctor.txt"),
                 "--capture", str(RECORDED / "capture"))  # fmt: skip
    assert (done.returncode, done.stderr) == (1, f"error: {tmp_path / 'f.json'}: No such file or directory\n")
    done = check("--facts", str(RECORDED / "facts-live.json"), "--kt-doctor", str(tmp_path / "d.txt"),
                 "--capture", str(RECORDED / "capture"))  # fmt: skip
    assert (done.returncode, done.stderr) == (1, f"error: {tmp_path / 'd.txt'}: No such file or directory\n")


def test_the_recorded_check_runs_to_its_table():
    done = check("--facts", str(RECORDED / "facts-live.json"), "--kt-doctor", str(RECORDED / "kt-doctor.txt"),
                 "--capture", str(RECORDED / "capture"))  # fmt: skip
    assert done.stderr == "", done.stderr
    assert done.stdout.startswith("| fact | ktinfra facts | kt doctor / capture | agree |\n")
    assert "| cpu.physical_cores | 16 | 16 | yes |" in done.stdout
