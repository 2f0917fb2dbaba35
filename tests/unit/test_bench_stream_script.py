"""benchmarks/stream.py (memory bandwidth on the AMX host) refuses bad options before it allocates its
arrays: a real run of the script. It parsed --threads one entry at a time inside the measuring loop and
wrote --out only at the end, so `--threads 1,2,x` or an --out in a missing directory failed with a
traceback after minutes of runs over three 2 GiB arrays, their results lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "stream.py"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "1,2,x"], "argument --threads: not a number: 'x'"),
        (["--threads", "4,0"], "argument --threads: must be above 0, not 0"),
        (["--gib", "nan"], "argument --gib: must be above 0, not nan"),
        (["--gib", "1e-12"], "--gib 1e-12: arrays of no float32 element"),
        (["--reps", "0"], "argument --reps: must be above 0, not 0"),
        (["--out", "/nonexistent-dir/stream.json"], "--out /nonexistent-dir/stream.json: not a file in an"),
    ],
)
def test_bad_options_are_refused_before_any_measuring(tmp_path, args, message):
    out = ["--out", str(tmp_path / "stream.json")] if "--out" not in args else []
    run = subprocess.run(
        [sys.executable, str(SCRIPT), *out, *args], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2, run.stderr  # argparse's usage error, before torch is imported
    assert f"stream.py: error: {message}" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "stream.json").exists()


def test_an_out_that_is_a_directory_is_refused(tmp_path):
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and "not a file in an existing, writable directory" in run.stderr
