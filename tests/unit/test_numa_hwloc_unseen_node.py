"""hwloc_indices (--kt-numa-nodes) kept the kernel's number of a node hwloc does not show, which could be
another node's hwloc index. The capture: the synthetic unbalanced dual-socket host (SYNTHETIC, no machine was
captured) made memoryless on node 0 (its CPUs stay, all memory on node 1, the sizes still adding up to
MemTotal). The kernel keeps a memoryless node out of every cpuset's mems (they lie within N_MEMORY), so the
capture's Mems_allowed_list is 1, or absent (a capture made before it was read). hwloc shows node 1 alone, as
its index 0; pools on nodes 0 and 1 were both 0, two pools on one node."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktinfra import facts
from ktinfra.plan.host import hwloc_indices, hwloc_nodes
from ktinfra.planner import plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def memoryless_node0(tmp_path: Path, mems: str | None = "1") -> dict:
    capture = tmp_path / f"memoryless-node0-mems-{mems}"
    shutil.copytree(HOSTS / "synthetic-2s-8470q-unbalanced", capture)
    meminfo = capture / "node-meminfo.txt"
    text = meminfo.read_text()
    for node, before, after in ((0, 394720112, 0), (1, 131536204, 526256316)):
        line = f"Node {node} MemTotal:       {before} kB"
        assert line in text
        text = text.replace(line, f"Node {node} MemTotal:       {after} kB")
    meminfo.write_text(text)
    status, cgroup = "Cpus_allowed_list:\t0-207\n", "/sys/fs/cgroup/cpuset.cpus.effective: 0-207\n"
    if mems is not None:
        status += f"Mems_allowed_list:\t{mems}\n"
        cgroup += f"/sys/fs/cgroup/cpuset.mems.effective: {mems}\n"
    (capture / "cgroup.txt").write_text(cgroup)
    (capture / "proc-self-status.txt").write_text(status)
    return facts.from_capture(capture)


@pytest.mark.parametrize("mems", ["1", None])
def test_a_node_hwloc_does_not_show_takes_no_other_node_s_index(tmp_path, mems):
    host = memoryless_node0(tmp_path, mems)
    assert hwloc_nodes(host) == [1]
    assert hwloc_indices(host, [1]) == [0]
    assert hwloc_indices(host, [0, 1]) == [1, 0]  # was [0, 0]
    assert hwloc_indices(host, [1, 0]) == [0, 1]


def test_several_unseen_nodes_get_indices_of_their_own(tmp_path):
    host = memoryless_node0(tmp_path)
    host["cpu"]["memory_nodes_allowed"] = "3"  # hwloc shows node 3 alone: index 0
    host["memory"]["numa_node_bytes"] = {"0": 0, "1": 0, "3": 1 << 40}
    indices = hwloc_indices(host, [0, 1, 3])
    assert indices == [1, 2, 0]  # was [0, 1, 0]
    assert len(set(indices)) == 3


def test_the_plan_names_no_node_twice(tmp_path):
    serve = plan(memoryless_node0(tmp_path, mems=None), "Qwen3-30B-A3B", "serve")["serve"]
    # no pool on the node hwloc does not show (test_plan_pool_nodes_that_hold.py): one, hwloc's node 0
    assert (serve["kt_threadpool_count"], serve["kt_numa_nodes"]) == (1, None)  # was 2 pools, [0, 0]
