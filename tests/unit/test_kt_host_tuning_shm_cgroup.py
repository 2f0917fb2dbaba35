"""kt_host_tuning: the /dev/shm size in a container under a memory cgroup limit.

tmpfs takes `size=75%` as 75 % of the RAM the kernel has, which in a container is the host's: a container
limited to 64 GiB on a 1 TiB host was asked for a 768 GiB /dev/shm (remounted so where it may: privileged,
LXC), and its pages count against the container's limit, so filling it past 64 GiB gets the container's
processes OOM-killed. The percentage is now taken of ktinfra facts' memory.total_bytes (kt_preflight_facts:
MemTotal capped by the cgroup limit) where that is below MemTotal in a container. The play renders the role's
kt_host_tuning_settings (vars/main.yml) with the given facts into tmp_path; nothing is applied.
"""

from __future__ import annotations

import json

import pytest
from role_play import ROLES, run_play

ROLE = ROLES / "kt_host_tuning"
GIB = 1024**3
LIMITED = {"total_bytes": 64 * GIB, "meminfo_total_bytes": 1024 * GIB, "cgroup_limit_bytes": 64 * GIB}
UNLIMITED = {"total_bytes": 1024 * GIB, "meminfo_total_bytes": 1024 * GIB, "cgroup_limit_bytes": None}


def shm_setting(tmp, facts: dict | None, shm: str) -> str:
    out = tmp / "settings.json"
    tasks = [
        {"ansible.builtin.include_vars": str(ROLE / "defaults" / "main.yml")},
        {"ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")},
        {"ansible.builtin.copy": {"content": "{{ kt_host_tuning_settings | to_json }}", "dest": str(out),
                                  "mode": "0644"}},
    ]  # fmt: skip
    extra = {"kt_host_tuning_shm_size": shm} | ({"kt_preflight_facts": facts} if facts is not None else {})
    rc, output = run_play(tmp, tasks, extra)
    assert rc == 0, output[-3000:]
    return next(s["value"] for s in json.loads(out.read_text()) if s["kind"] == "shm")


@pytest.mark.parametrize(("shm", "wanted"), [("75%", "50331648k"), ("50%", "33554432k")])
def test_a_percentage_is_of_the_containers_memory_limit(tmp_path, shm, wanted):
    """Before: "75%" went to kt-tune.sh as it was (tmpfs: 768 GiB of the 1 TiB host); now 48 GiB in KiB."""
    assert shm_setting(tmp_path, {"container": True, "memory": LIMITED}, shm) == wanted


@pytest.mark.parametrize(
    "facts",
    [{"container": False, "memory": LIMITED}, {"container": True, "memory": UNLIMITED},
     {"container": True, "memory": {"total_bytes": None, "meminfo_total_bytes": None}},
     {"container": True}, None],
)  # fmt: skip
def test_a_percentage_stays_one_where_no_container_limit_is_known(tmp_path, facts):
    """A host's /dev/shm is the whole machine's (the cgroup of the ansible session does not bound it), and
    fstab keeps the percentage so it follows the RAM; unknown memory leaves it to tmpfs as before."""
    assert shm_setting(tmp_path, facts, "75%") == "75%"


def test_an_absolute_size_is_kept(tmp_path):
    assert shm_setting(tmp_path, {"container": True, "memory": LIMITED}, "16G") == "16G"
