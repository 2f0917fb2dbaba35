"""A container whose cpuset is NUMA node 1's CPUs only, on the synthetic unbalanced dual-socket host
(synthetic-2s-8470q-unbalanced: node 0 404 GB, node 1 135 GB, 52 cores each; SYNTHETIC, no machine was
captured). The capture is that fixture with the container's cpuset written over its cgroup.txt and
proc-self-status.txt, as `docker run --cpuset-cpus 52-103,156-207 [--cpuset-mems 1]` would show them.

kt-kernel loads hwloc's topology without HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED, so hwloc leaves out the
nodes outside the cpuset's mems: with mems 1, kernel node 1 is hwloc's NUMA node 0, the node kt-kernel binds
pool 0 to by default (serving without --kt-numa-nodes, and fine-tuning, which names no nodes). With mems 0-1
node 1 stays hwloc's node 1."""

from __future__ import annotations

import shutil
from pathlib import Path

from ktinfra import facts
from ktinfra.planner import plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
NODE1_CPUS = "52-103,156-207"
NODE1_BYTES = 134693072896  # the fixture's node 1: MemTotal 131536204 kB


def node1_container(tmp_path: Path, mems: str) -> dict:
    capture = tmp_path / f"node1-mems-{mems}"
    shutil.copytree(HOSTS / "synthetic-2s-8470q-unbalanced", capture)
    (capture / "cgroup.txt").write_text(
        f"/sys/fs/cgroup/cpuset.cpus.effective: {NODE1_CPUS}\n"
        f"/sys/fs/cgroup/cpuset.mems.effective: {mems}\n"
        "/sys/fs/cgroup/cpu.max: max 100000\n"
        "/sys/fs/cgroup/memory.max: max\n"
    )
    (capture / "proc-self-status.txt").write_text(
        f"Cpus_allowed_list:\t{NODE1_CPUS}\nMems_allowed_list:\t{mems}\n"
    )
    return facts.from_capture(capture)


def test_the_container_may_allocate_node_1s_memory_only(tmp_path):
    memory = node1_container(tmp_path, "1")["memory"]
    assert memory["total_bytes"] == NODE1_BYTES  # not the host's 539 GB
    assert memory["available_bytes"] <= NODE1_BYTES
    assert memory["meminfo_total_bytes"] == 538886467584


def test_with_both_nodes_mems_the_total_is_the_hosts(tmp_path):
    assert node1_container(tmp_path, "0-1")["memory"]["total_bytes"] == 538886467584


def test_serve_on_node_1_alone_is_hwloc_node_0(tmp_path):
    result = plan(node1_container(tmp_path, "1"), "Qwen3-30B-A3B", "serve")
    serve = result["serve"]
    assert result["feasible"], result["problems"]
    assert (serve["kt_cpuinfer"], serve["kt_threadpool_count"]) == (52, 1)
    # hwloc shows node 1 alone, as its NUMA node 0: '--kt-numa-nodes 1' would find no node
    assert serve["kt_numa_nodes"] is None
    assert "the kernel's node(s) 1" in result["reasons"]["kt_numa_nodes"]


def test_serve_with_both_mems_names_node_1(tmp_path):
    result = plan(node1_container(tmp_path, "0-1"), "Qwen3-30B-A3B", "serve")
    assert (result["serve"]["kt_cpuinfer"], result["serve"]["kt_numa_nodes"]) == (52, [1])


def test_serve_checks_the_experts_against_node_1(tmp_path):
    result = plan(node1_container(tmp_path, "0-1"), "DeepSeek-V3", "serve", cpu_format="AMXINT4")
    assert not result["feasible"]
    assert any("node 1 has 135 GB" in p for p in result["problems"]), result["problems"]


def test_sft_on_node_1_alone_binds_its_pool_there(tmp_path):
    result = plan(node1_container(tmp_path, "1"), "Qwen3-30B-A3B", "sft")
    kt = result["sft"]["kt"]["kt_config"]
    assert result["feasible"], result["problems"]
    assert (kt["kt_num_threads"], kt["kt_threadpool_count"]) == (52, 1)
    assert not [w for w in result["warnings"] if "run away" in w]
    assert "on node(s) 1 " in result["reasons"]["kt"]


def test_sft_with_both_mems_warns_that_pool_0_is_node_0(tmp_path):
    result = plan(node1_container(tmp_path, "0-1"), "Qwen3-30B-A3B", "sft")
    warning = next(w for w in result["warnings"] if "run away" in w)
    assert "thread pool 0 to NUMA node 0" in warning and "usable on node(s) 1 only" in warning


def test_sft_checks_the_experts_against_node_1(tmp_path):
    """Qwen3-235B-A22B's 454 GB of BF16 experts: one pool, on node 1 (135 GB)."""
    result = plan(node1_container(tmp_path, "1"), "Qwen3-235B-A22B", "sft")
    assert not result["feasible"]
    assert any("node 1 has 135 GB" in p for p in result["problems"]), result["problems"]


def test_legacy_serve_on_node_1_alone_checks_node_1s_memory(tmp_path):
    """The legacy stack (kt-kernel v0.4.4, worker_pool.cpp: hwloc_get_obj_by_type(HWLOC_OBJ_NUMANODE, i) as
    0.7.2) binds pool i to hwloc's node i, node 1 here: its pool check read node 0's 404 GB."""
    host = node1_container(tmp_path, "1")
    result = plan(host, "DeepSeek-V3", "serve", cpu_format="AMXINT4", stack="kt-0.4-autodl")
    assert not result["feasible"]
    assert any("node 1 has 135 GB" in p for p in result["problems"]), result["problems"]
    assert not any("node 0 has" in p for p in result["problems"]), result["problems"]
