"""hwloc_nodes (the order --kt-numa-nodes counts in) left out a node whose memory is all huge pages: its
numa_node_bytes is 0 (MemTotal less every huge page), and the order took only the nodes with bytes > 0.
hwloc 2 makes a NUMA node of every online node (topology-linux.c look_sysfsnode: its cpumap and nodeset,
MemTotal as an attribute) and drops only those outside the cgroup cpuset's mems, so that node is still
hwloc's node 0, and a pool on kernel node 1 is index 1, not 0 (which kt-kernel would bind to the huge-page
node). The capture: the synthetic unbalanced dual-socket host (SYNTHETIC, no machine was captured) with node
0's memory given to 1 GiB pages (node-hugepages.txt), cpuset mems 0-1."""

from __future__ import annotations

import shutil
from pathlib import Path

from ktinfra import facts
from ktinfra.plan.host import hwloc_indices, hwloc_nodes, sequential_pool_nodes

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
NODE0_KIB = 394720112  # the fixture's node 0 MemTotal


def hugepage_node0(tmp_path: Path) -> dict:
    capture = tmp_path / "hugepage-node0"
    shutil.copytree(HOSTS / "synthetic-2s-8470q-unbalanced", capture)
    pages = -(-NODE0_KIB // (1 << 20))  # 1 GiB pages covering node 0's MemTotal
    (capture / "node-hugepages.txt").write_text(
        f"/sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages:{pages}\n"
        "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages:0\n"
        "/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages:0\n"
        "/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages:0\n"
    )
    return facts.from_capture(capture)


def test_the_facts_show_no_ordinary_memory_on_node_0(tmp_path):
    host = hugepage_node0(tmp_path)
    assert host["memory"]["numa_node_bytes"]["0"] == 0
    assert host["cpu"]["memory_nodes_allowed"] == "0-1"


def test_a_node_of_huge_pages_keeps_its_hwloc_index(tmp_path):
    host = hugepage_node0(tmp_path)
    assert hwloc_nodes(host) == [0, 1]  # was [1]
    assert hwloc_indices(host, [1]) == [1]  # was [0]: kernel node 0, the huge-page node
    assert sequential_pool_nodes(host, 1) == [0]  # pool 0 without a node list is hwloc's node 0


def test_without_mems_the_nodes_with_memory_are_taken(tmp_path):
    host = hugepage_node0(tmp_path)
    host["cpu"]["memory_nodes_allowed"] = None  # a capture without Mems_allowed_list cannot tell
    host["memory"].pop("numa_node_total_bytes", None)  # nor facts made before they carried each MemTotal
    assert hwloc_nodes(host) == [1]
