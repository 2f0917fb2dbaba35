"""kt_host_tuning: a percentage /dev/shm size on a host with a hugetlb pool.

tmpfs reads `size=75%` as 75 % of MemTotal, and MemTotal counts the hugetlb pool (vm.nr_hugepages,
hugepages= on the kernel command line), whose pages tmpfs cannot use: a 1 TiB host with 512 GiB of huge
pages got a 768 GiB /dev/shm limit on the 512 GiB left, so weights staged there could take every page outside
the pool before tmpfs said full. On a host the percentage is now of MemTotal less ktinfra facts'
memory.hugetlb_bytes, in KiB, applied and persisted in fstab (the boot's remount would read size=75% of
MemTotal again); without a pool it stays a percentage. The facts come as kt_preflight_facts, as kt_preflight
leaves them; nothing is applied to this host.
"""

from __future__ import annotations

import pytest
from test_kt_host_tuning_role import DISTRO_FSTAB, persist_shm, shm_lines
from test_kt_host_tuning_shm_cgroup import shm_setting

GIB = 1024**3
POOL = {"total_bytes": 512 * GIB, "meminfo_total_bytes": 1024 * GIB, "cgroup_limit_bytes": None,
        "hugepages_total": 262144, "hugetlb_bytes": 512 * GIB}  # fmt: skip
NO_POOL = POOL | {"total_bytes": 1024 * GIB, "hugepages_total": 0, "hugetlb_bytes": 0}


@pytest.mark.parametrize(("shm", "wanted"), [("75%", "402653184k"), ("50%", "268435456k")])
def test_a_hosts_percentage_leaves_out_the_huge_page_pool(tmp_path, shm, wanted):
    """Before: "75%" went to tmpfs as it was: 768 GiB of a host with 512 GiB outside the pool; now 384 GiB."""
    assert shm_setting(tmp_path, {"container": False, "memory": POOL}, shm) == wanted


def test_a_pool_of_all_the_ram_gives_the_smallest_size_not_no_limit(tmp_path):
    """size=0 is tmpfs' 'no limit': a pool as large as MemTotal must not round down to it."""
    memory = POOL | {"hugetlb_bytes": 1024 * GIB, "total_bytes": 1}
    assert shm_setting(tmp_path, {"container": False, "memory": memory}, "75%") == "1k"


@pytest.mark.parametrize(
    "memory",
    [NO_POOL, {k: v for k, v in POOL.items() if k not in ("hugetlb_bytes", "hugepages_total")}],
    ids=["no-pool", "facts-without-hugetlb"],
)
def test_a_host_without_a_pool_keeps_the_percentage(tmp_path, memory):
    assert shm_setting(tmp_path, {"container": False, "memory": memory}, "75%") == "75%"


def test_fstab_gets_the_size_without_the_pool_and_a_rerun_changes_nothing(tmp_path):
    """Before: fstab said size=75%, which each boot's remount reads as 75 % of MemTotal, pool included."""
    fstab = tmp_path / "fstab"
    fstab.write_text(DISTRO_FSTAB)
    rc, output = persist_shm(tmp_path, fstab, "75%", container=False, memory=POOL)
    assert rc == 0 and "changed=1" in output, output[-3000:]
    line = "tmpfs /dev/shm tmpfs defaults,nosuid,nodev,size=402653184k 0 0"
    assert shm_lines(fstab) == [line], fstab.read_text()
    rc, output = persist_shm(tmp_path, fstab, "75%", container=False, memory=POOL)
    assert rc == 0 and "changed=0" in output, output[-3000:]
