"""--weight-path at a loop of links was planned as a directory "not there yet": the GGUF plan said "the GGUF
download puts 32.4 GB of gguf:Q8_0 weights there", where nothing can be read or written. The GGUF reader
swallowed the ELOOP of listing it like a missing folder's ENOENT; it now names the loop (exit 1)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ktinfra.planner import PlanInputError, load_facts, plan

NO_AMX = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "facts" / "xeon8352v-4090-noamx.json"


def loop(tmp_path: Path) -> Path:
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    return tmp_path / "a"


@pytest.mark.parametrize("cpu_format", ["GGUF:Q8_0", None])
def test_a_weight_path_that_is_a_loop_of_links_is_refused(tmp_path, cpu_format):
    path = loop(tmp_path)
    said = re.escape(f"--weight-path {path}: {path} is a link that leads back to itself")
    with pytest.raises(PlanInputError, match=said):
        plan(load_facts(NO_AMX), "Qwen3-30B-A3B", "serve", weight_path=str(path), cpu_format=cpu_format)


def test_the_cli_says_so_without_a_traceback(tmp_path):
    path = loop(tmp_path)
    args = ["plan", "--model", "Qwen3-30B-A3B", "--mode", "serve", "--facts", str(NO_AMX)]
    res = subprocess.run(
        [sys.executable, "-m", "ktinfra", *args, "--weight-path", str(path), "--cpu-format", "GGUF:Q8_0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the checkout: PYTHONPATH picks the ktinfra run
        check=False,
    )
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "(a loop of links)" in res.stderr and res.stdout == ""


def test_a_weight_path_not_there_yet_is_still_planned(tmp_path):
    result = plan(load_facts(NO_AMX), "Qwen3-30B-A3B", "serve", weight_path=str(tmp_path / "later"),
                  cpu_format="GGUF:Q8_0")  # fmt: skip
    assert "the GGUF download puts" in result["reasons"]["kt_weight_path"]
