"""benchmarks/moe_cpu_share.py, run for real as a subprocess: a method or --skip-by it does not know is
refused before any child runs (before, build() took anything but AMXINT8 for BF16 and run_one anything but
`mask` for every expert on the CPU, so 'amxint8' or 'idz' measured something else under the name given),
every run's result (a failed one too) lands in --out, whole, and the exit says when one failed.

The machine has no kt-kernel: each child fails for real at kt_kernel, which is the failed-run path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "moe_cpu_share.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--methods", "amxint8"], "argument --methods: unknown 'amxint8' (known: AMXINT8, BF16)"),
        (["--methods", "AMXINT8,AMXINT4"], "argument --methods: unknown 'AMXINT4' (known: AMXINT8, BF16)"),
        (["--skip-by", "mask,idz"], "argument --skip-by: unknown 'idz' (known: mask, ids)"),
        (["--one", "AMXINT8:gpu"], "argument --one: unknown 'gpu' (known: mask, ids)"),
        (["--threads", "0"], "argument --threads: must be above 0, not 0"),
        (["--out", "/nonexistent-dir/s.json"], "--out /nonexistent-dir/s.json: not a file in an existing"),
    ],
)
def test_bad_options_are_refused_before_any_run(tmp_path, args, message):
    out = [] if "--out" in args else ["--out", str(tmp_path / "s.json")]
    done = run(*out, *args)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert f"moe_cpu_share.py: error: {message}" in done.stderr
    assert "Traceback" not in done.stderr and "FAILED" not in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_every_failed_run_is_written_and_the_exit_says_so(tmp_path):
    out = tmp_path / "s.json"
    done = run("--methods", "BF16", "--skip-by", "ids,mask", "--threads", "2", "--out", str(out))
    assert done.stdout.count("FAILED") == 2, done.stdout
    assert done.returncode == 1, done.stderr  # before: 0
    assert "2 of 2 runs failed" in done.stderr
    results = json.loads(out.read_text())["results"]
    assert [(r["method"], r["skip_by"], r["threads"]) for r in results] == [
        ("BF16", "ids", 2),
        ("BF16", "mask", 2),
    ]
    for result in results:  # the child's reason, one line, not a traceback
        assert "error: moe_cpu_share.py needs kt_kernel" in result["error"]
        assert "Traceback" not in result["error"]
    assert "| BF16 | ids | error |" in done.stdout  # the table still printed
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temporary file left
