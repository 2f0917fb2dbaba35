"""kt_host_tuning: the /dev/shm size applied now and the one written to fstab are one value.

Without ktinfra facts (no kt_preflight run) or with facts that lack MemTotal or a host's hugetlb pool, the
role kept a percentage as it was: kt-tune.sh, given 75%, remounted with 75 % of MemTotal less the pool read
from meminfo (402653184k on a 1 TiB host with 512 GiB of huge pages), while fstab got size=75%, which each
boot's remount takes of MemTotal, pool included (768 GiB). The role now reads the host's meminfo itself where
the facts do not give the memory, and a meminfo without MemTotal fails the play before anything changes.

The play is the role's validate.yml, then persist.yml's /dev/shm steps with the fstab in tmp_path; the value
it hands kt-tune.sh is then run through kt-tune.sh with `df` and `mount` stand-ins on PATH (as in
test_kt_host_tuning_shm_script_pool.py): nothing on this host is remounted or written.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from role_play import ROLES, run_play
from test_kt_host_tuning_role import DISTRO_FSTAB, SHM_TASK, shm_lines
from test_kt_host_tuning_shm_script_pool import MEMTOTAL_KB, POOL_KB, POOL_SIZE_KB, meminfo

ROLE = ROLES / "kt_host_tuning"
GIB = 1024**3
SCRIPT = ROLE / "files" / "kt-tune.sh"


def tune_role(tmp: Path, info: Path, facts: dict | None) -> tuple[int, str, Path, str]:
    """rc, output, the fstab and the /dev/shm value the role hands kt-tune.sh ("" where the play failed)."""
    fstab = tmp / "fstab"
    fstab.write_text(DISTRO_FSTAB)
    persist = yaml.safe_load((ROLE / "tasks" / "persist.yml").read_text())
    first = next(i for i, t in enumerate(persist) if t.get("name") == "Read the /dev/shm line of fstab")
    last = next(i for i, t in enumerate(persist) if t.get("name") == SHM_TASK)
    settings = tmp / "settings.json"
    tasks = [
        {"ansible.builtin.include_vars": str(ROLE / "defaults" / "main.yml")},
        {"ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")},
        {"ansible.builtin.include_tasks": str(ROLE / "tasks" / "validate.yml")},
        *persist[first : last + 1],
        {"ansible.builtin.copy": {"content": "{{ kt_host_tuning_settings | to_json }}", "dest": str(settings),
                                  "mode": "0644"}},
    ]  # fmt: skip
    extra = {"kt_host_tuning_shm_size": "75%", "kt_host_tuning__fstab": str(fstab),
             "kt_host_tuning__meminfo": str(info), "kt_host_tuning_cpu_governor": ""}  # fmt: skip
    rc, output = run_play(tmp, tasks, extra | ({"kt_preflight_facts": facts} if facts is not None else {}))
    value = ""
    if settings.exists():
        value = next(s["value"] for s in json.loads(settings.read_text()) if s["kind"] == "shm")
    return rc, output, fstab, value


def remount_size(tmp: Path, info: Path, value: str) -> str:
    """The size= kt-tune.sh remounts /dev/shm with when handed `value` (shown as 8 GiB before)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    record = tmp / "mount-args"
    stubs = {"df": 'printf "  1B-blocks\\n%s\\n" 8589934592', "mount": f'printf "%s\\n" "$*" > {record}'}
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", KT_TUNE_MEMINFO=str(info), KT_TUNE_DRY="")
    out = subprocess.run(["sh", str(SCRIPT), "shm", "/dev/shm", value],
                         capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    assert json.loads(out)["status"] == "set", out
    return record.read_text().split("size=", 1)[1].split()[0]


def fstab_size(fstab: Path) -> str:
    (line,) = shm_lines(fstab)
    return line.split()[3].split("size=", 1)[1]


@pytest.fixture(autouse=True)
def _needs_dev_shm():
    assert Path("/dev/shm").is_dir(), "kt-tune.sh reports absent without /dev/shm"


FACTS_WITHOUT_POOL = {"container": False, "memory": {"total_bytes": MEMTOTAL_KB * 1024,
                                                     "meminfo_total_bytes": MEMTOTAL_KB * 1024}}  # fmt: skip


@pytest.mark.parametrize(
    "facts",
    [
        None,
        # slow: facts without an integer MemTotal, the same first test of kt_host_tuning__facts_give_memory
        # (meminfo read instead) as the no-facts case
        pytest.param({"container": False}, marks=pytest.mark.slow),
        # slow: facts without an integer MemTotal, the same first test of kt_host_tuning__facts_give_memory
        # (meminfo read instead) as the no-facts case
        pytest.param({"container": False, "memory": {"meminfo_total_bytes": None}}, marks=pytest.mark.slow),
        FACTS_WITHOUT_POOL,
    ],
    ids=["no-facts", "facts-without-memory", "facts-without-memtotal", "facts-without-the-pool"],
)
def test_without_the_facts_fstab_and_the_remount_get_the_same_size(tmp_path, facts):
    """Before: fstab size=75% (768 GiB at each boot), the remount 402653184k (384 GiB)."""
    info = meminfo(tmp_path, POOL_KB)
    rc, output, fstab, value = tune_role(tmp_path, info, facts)
    assert rc == 0, output[-3000:]
    assert fstab_size(fstab) == remount_size(tmp_path, info, value) == f"{POOL_SIZE_KB}k", fstab.read_text()


def test_without_a_pool_both_keep_the_percentage(tmp_path):
    info = meminfo(tmp_path, 0)
    rc, output, fstab, value = tune_role(tmp_path, info, None)
    assert rc == 0, output[-3000:]
    assert fstab_size(fstab) == remount_size(tmp_path, info, value) == "75%"


@pytest.mark.parametrize("content", ["MemFree:        1000000 kB\n", None], ids=["no-memtotal", "unreadable"])
def test_a_percentage_that_cannot_be_computed_fails_before_anything_changes(tmp_path, content):
    """Before: the play wrote size=75% to fstab and kt-tune.sh reported not_set."""
    info = tmp_path / "meminfo"
    if content is not None:
        info.write_text(content)
    rc, output, fstab, value = tune_role(tmp_path, info, None)
    assert rc != 0, output[-3000:]
    message = " ".join(output.split())
    assert "kt_host_tuning_shm_size 75% is a percentage of the RAM outside the hugetlb pool" in message, (
        output[-3000:]
    )
    assert "nothing was changed" in message and str(info) in message
    assert fstab.read_text() == DISTRO_FSTAB and value == ""
