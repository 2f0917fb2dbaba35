"""The host suite's kt-kernel forward probe under a CPU quota smaller than the NUMA node count: the suite
asked CPUInfer for `physical_cores` threads (facts' count, which the quota lowers) split over every node, so
a 1-CPU quota on a 2-node host built a pool of 0 threads. The pools now stop at the thread count.

The host is synthetic (2 sockets, 2 nodes, 4 cores each, no HT) in the cpu probe's answer layout, with
the quota as the probe's cgroup text gives it; the thread split is the probe's own make_cpu_infer."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

INFRA = Path(__file__).parents[1] / "infra"
sys.path.insert(0, str(INFRA))
from kthost import facts_cores, pool_nodes  # noqa: E402

ROWS = [[cpu, cpu % 4, cpu // 4, cpu // 4] for cpu in range(8)]  # CPU, core, socket, node


def _probe(quota_cpus: float) -> dict:
    cgroup = (
        f"/sys/fs/cgroup/cpu/cpu.cfs_quota_us: {int(quota_cpus * 100000)}\n"
        "/sys/fs/cgroup/cpu/cpu.cfs_period_us: 100000\n"
    )
    return {"usable_cpus": list(range(8)), "physical_cores": 8, "numa_nodes": [0, 1], "cpu_rows": ROWS,
            "cgroup": cgroup}  # fmt: skip


def _split(threads: int, nodes: list) -> list:
    """subpool_thread_count as the forward probe hands it to CPUInfer."""
    probe = runpy.run_path(str(INFRA / "probes" / "kt_kernel_moe.py"), run_name="probe")
    ext = SimpleNamespace(WorkerPoolConfig=SimpleNamespace, CPUInfer=lambda cfg: cfg)
    return probe["make_cpu_infer"](ext, threads, nodes).subpool_thread_count


@pytest.mark.parametrize(
    ("quota", "threads", "nodes"), [(1, 1, [0]), (1.5, 1, [0]), (2, 2, [0, 1]), (8, 8, [0, 1])]
)
def test_every_pool_gets_a_thread(quota, threads, nodes):
    cpu = facts_cores(_probe(quota))
    assert cpu["physical_cores"] == threads
    assert pool_nodes(cpu) == nodes
    split = _split(threads, pool_nodes(cpu))
    assert sum(split) == threads and min(split) >= 1, split


def test_the_old_split_had_an_empty_pool():
    """What the suite asked for before (every node): the failure this fixes, shown on the same probe."""
    cpu = facts_cores(_probe(1))
    assert _split(cpu["physical_cores"], cpu["numa_nodes"]) == [1, 0]
