"""A capture without Mems_allowed_list (made before the capture read it) still dropped a node whose memory is
all huge pages from hwloc's order: hwloc_nodes fell back to the nodes with bytes in memory.numa_node_bytes
(MemTotal less every huge page: 0 there), so a pool on kernel node 1 got index 0, which kt-kernel resolves
to the huge-page node. hwloc 2 counts every node with memory (a memoryless one has MemTotal 0), so the facts
now carry each node's MemTotal (memory.numa_node_total_bytes, from the capture's node-meminfo.txt or
numactl's sizes) and the fallback keeps the nodes whose MemTotal is above 0. The capture: the synthetic
unbalanced dual-socket host (SYNTHETIC, no machine was captured) with node 0's memory in 1 GiB pages and
no Mems_allowed_list."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktinfra import facts
from ktinfra.plan.host import FactsError, hwloc_indices, hwloc_nodes, sequential_pool_nodes, validate
from ktinfra.planner import plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
NODE_KIB = {0: 394720112, 1: 131536204}  # the fixture's MemTotal per node


def old_capture_hugepage_node0(tmp_path: Path) -> dict:
    capture = tmp_path / "hugepage-node0-no-mems"
    shutil.copytree(HOSTS / "synthetic-2s-8470q-unbalanced", capture)
    pages = -(-NODE_KIB[0] // (1 << 20))  # 1 GiB pages covering node 0's MemTotal
    (capture / "node-hugepages.txt").write_text(
        f"/sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages:{pages}\n"
        "/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages:0\n"
    )
    (capture / "proc-self-status.txt").write_text("Cpus_allowed_list:\t0-207\n")
    (capture / "cgroup.txt").write_text("/sys/fs/cgroup/cpuset.cpus.effective: 0-207\n")
    return facts.from_capture(capture)


def test_the_facts_carry_each_node_s_memtotal(tmp_path):
    memory = old_capture_hugepage_node0(tmp_path)["memory"]
    assert memory["numa_node_bytes"]["0"] == 0
    assert memory["numa_node_total_bytes"] == {str(n): kib * 1024 for n, kib in NODE_KIB.items()}


def test_without_mems_a_node_of_huge_pages_keeps_its_hwloc_index(tmp_path):
    host = old_capture_hugepage_node0(tmp_path)
    assert host["cpu"]["memory_nodes_allowed"] is None
    assert hwloc_nodes(host) == [0, 1]  # was [1]
    assert hwloc_indices(host, [1]) == [1]  # was [0]: the huge-page node
    assert sequential_pool_nodes(host, 1) == [0]


def test_the_plan_names_node_1_by_its_hwloc_index(tmp_path):
    result = plan(old_capture_hugepage_node0(tmp_path), "Qwen3-30B-A3B", "serve")
    serve = result["serve"]
    # the pool goes where the memory is (node 1); kt-kernel must be told hwloc index 1, not its default 0
    assert (serve["kt_threadpool_count"], serve["kt_numa_nodes"]) == (1, [1])  # was (1, None)
    assert result["reasons"]["kt_numa_nodes"].startswith("1: the pools' nodes, passed as --kt-numa-nodes")


def test_a_memoryless_node_stays_out_without_mems(tmp_path):
    host = old_capture_hugepage_node0(tmp_path)
    host["memory"]["numa_node_total_bytes"] = {"0": 0, "1": sum(NODE_KIB.values()) * 1024}
    assert hwloc_nodes(host) == [1]


def test_facts_without_the_key_fall_back_to_the_usable_bytes(tmp_path):
    host = old_capture_hugepage_node0(tmp_path)
    host["memory"].pop("numa_node_total_bytes", None)  # facts written before the key
    assert hwloc_nodes(host) == [1]
    host["memory"]["numa_node_total_bytes"] = None  # a capture whose node sizes were not taken
    assert hwloc_nodes(host) == [1]


def test_numactl_sizes_give_the_totals_too(tmp_path):
    capture = tmp_path / "numactl-only"
    shutil.copytree(HOSTS / "synthetic-2s-8470q-unbalanced", capture)
    (capture / "node-meminfo.txt").unlink()
    memory = facts.from_capture(capture)["memory"]
    assert memory["numa_node_bytes_source"] == "numactl-hardware.txt"
    assert memory["numa_node_total_bytes"] == memory["numa_node_bytes"]  # no huge pages there


@pytest.mark.parametrize("bad", [{"x": 1}, {"0": -1}, {"0": "1"}, [1]])
def test_the_planner_refuses_a_bad_total(tmp_path, bad):
    host = old_capture_hugepage_node0(tmp_path)
    host["memory"]["numa_node_total_bytes"] = bad
    with pytest.raises(FactsError, match="memory.numa_node_total_bytes"):
        validate(host)
