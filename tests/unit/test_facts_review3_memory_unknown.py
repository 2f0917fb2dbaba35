"""memory.total_bytes is min(MemTotal, cgroup limit): a cgroup limit caps the RAM, it does not tell it. The
real 4xH200 capture runs under a 512 GiB memory.max on a host with 504 GiB of RAM; without a readable
/proc/meminfo its facts said 512 GiB of RAM (and 510 GiB available), more than the host has."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ktinfra.facts import from_capture

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
REAL = HOSTS / "4xh200-xeon-amx-64c"
LIMIT = 549755813888  # its cgroup.txt's memory.max: 512 GiB


def _without_meminfo(tmp_path: Path, meminfo: str | None) -> Path:
    capture = tmp_path / "cap"
    shutil.copytree(REAL, capture)
    if meminfo is None:
        (capture / "meminfo.txt").unlink()
    else:
        (capture / "meminfo.txt").write_text(meminfo)
    return capture


def test_the_real_capture_is_min_of_memtotal_and_the_limit():
    memory = from_capture(REAL)["memory"]
    assert memory["cgroup_limit_bytes"] == LIMIT
    assert memory["total_bytes"] == memory["meminfo_total_bytes"] == 528231220 * 1024 < LIMIT


def test_without_meminfo_the_ram_is_unknown_not_the_cgroup_limit(tmp_path):
    memory = from_capture(_without_meminfo(tmp_path, None))["memory"]
    assert memory["cgroup_limit_bytes"] == LIMIT  # still reported, as the limit it is
    assert memory["total_bytes"] is None  # before: 549755813888, 8 GiB more than the host's RAM
    assert memory["available_bytes"] is None  # before: the limit less the cgroup's usage, 547729129472


def test_a_damaged_memtotal_is_unknown_too(tmp_path):
    memory = from_capture(_without_meminfo(tmp_path, "MemTotal: 0 kB\nMemFree: 1 kB\n"))["memory"]
    assert memory["total_bytes"] is None and memory["available_bytes"] is None


def test_plan_refuses_the_capture_instead_of_sizing_for_the_limit(tmp_path):
    capture = _without_meminfo(tmp_path, None)
    done = subprocess.run(
        [sys.executable, "-m", "ktinfra", "plan", "-m", "Qwen3-30B-A3B", "--from", str(capture), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 1, done.stdout  # before: 0, a plan for 512 GiB of RAM
    assert done.stderr.startswith("error: facts lack memory.total_bytes"), done.stderr
