"""kt_host_tuning's kt-tune.sh with a percentage /dev/shm size on a host with a hugetlb pool.

The role takes a percentage of MemTotal less the hugetlb pool (497938f: tmpfs cannot use the pool's pages),
but kt-tune.sh, which gets the percentage as it is where the role has no facts, checked it against MemTotal
alone and remounted with size=75%, which the kernel also takes of MemTotal: 75 % of a 1 TiB host with a 512
GiB pool was a 768 GiB /dev/shm on the 512 GiB left, reported applied. The script now reads the pool from
meminfo (Hugetlb, else HugePages_Total x Hugepagesize, as ktinfra facts do) and applies the percentage of the
rest in KiB. Its meminfo comes from KT_TUNE_MEMINFO; `df` and `mount` are stand-ins on PATH that show a
chosen /dev/shm size and record the remount, so nothing on this host is remounted.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from role_play import ROLES

SCRIPT = ROLES / "kt_host_tuning" / "files" / "kt-tune.sh"
GIB_KB = 1024 * 1024  # meminfo counts kB
MEMTOTAL_KB = 1024 * GIB_KB  # a 1 TiB host
POOL_KB = 512 * GIB_KB  # 262144 pages of 2 MiB
POOL_SIZE_KB = (MEMTOTAL_KB - POOL_KB) * 75 // 100  # 402653184k, the role's value for this host


def meminfo(tmp: Path, pool_kb: int, hugetlb_line: bool = True) -> Path:
    lines = [
        f"MemTotal:       {MEMTOTAL_KB} kB",
        "MemFree:        1000000 kB",
        f"HugePages_Total:   {pool_kb // 2048}",
        "HugePages_Free:    0",
        "Hugepagesize:       2048 kB",
    ]
    if hugetlb_line:  # Linux 4.16+; older kernels show the default-size pool only
        lines.append(f"Hugetlb:        {pool_kb} kB")
    path = tmp / "meminfo"
    path.write_text("\n".join(lines) + "\n")
    return path


def tune(tmp: Path, info: Path, shm_bytes: int) -> tuple[dict, str | None]:
    """Run `kt-tune.sh shm /dev/shm 75%` with /dev/shm shown as SHM_BYTES; the remount's options, if any."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    record = tmp / "mount-args"
    stubs = {"df": f'printf "  1B-blocks\\n%s\\n" {shm_bytes}', "mount": f'printf "%s\\n" "$*" > {record}'}
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", KT_TUNE_MEMINFO=str(info), KT_TUNE_DRY="")
    out = subprocess.run(["sh", str(SCRIPT), "shm", "/dev/shm", "75%"],
                         capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    return json.loads(out), (record.read_text().strip() if record.exists() else None)


@pytest.fixture(autouse=True)
def _needs_dev_shm():
    assert Path("/dev/shm").is_dir(), "kt-tune.sh reports absent without /dev/shm"


@pytest.mark.parametrize("hugetlb_line", [True, False])
def test_a_percentage_is_of_the_memory_outside_the_pool(tmp_path, hugetlb_line):
    info = meminfo(tmp_path, POOL_KB, hugetlb_line)
    # 75 % of MemTotal, what size=75% gave: the old check read it as applied
    report, remount = tune(tmp_path, info, MEMTOTAL_KB * 1024 * 3 // 4)
    assert report["status"] == "set", report
    assert remount == f"-o remount,size={POOL_SIZE_KB}k /dev/shm"  # 384 GiB, not size=75% (768 GiB)


def test_the_pool_corrected_size_reads_back_as_applied(tmp_path):
    report, remount = tune(tmp_path, meminfo(tmp_path, POOL_KB), POOL_SIZE_KB * 1024)
    assert report["status"] == "applied", report  # before: set, at every run
    assert remount is None


def test_without_a_pool_the_percentage_is_of_memtotal_as_before(tmp_path):
    info = meminfo(tmp_path, 0)
    assert tune(tmp_path, info, MEMTOTAL_KB * 1024 * 3 // 4)[0]["status"] == "applied"
    report, remount = tune(tmp_path, info, 8 << 30)
    assert report["status"] == "set" and remount == "-o remount,size=75% /dev/shm"


def test_a_meminfo_without_memtotal_is_reported_not_remounted(tmp_path):
    info = tmp_path / "meminfo"
    info.write_text("MemFree:        1000000 kB\n")
    report, remount = tune(tmp_path, info, 8 << 30)
    assert (report["status"], report["reason"]) == ("not_set", f"no MemTotal in {info} to take 75% of")
    assert remount is None
