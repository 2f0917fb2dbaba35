"""Where the planner puts the work: which GPUs serve (identical ones only), how kt-kernel's NUMA thread
pools land on the usable cores, and GPUs whose compute capability the facts do not know."""

import shutil
from pathlib import Path

from ktinfra import facts as facts_module
from ktinfra.planner import load_facts, plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RTX_3050 = {"index": 1, "name": "NVIDIA GeForce RTX 3050", "memory_mib": 8192, "compute_capability": "8.6"}


def h100(**memory) -> dict:
    host = load_facts(FIXTURES / "facts" / "h100-amx.json")
    host["disks"][0]["avail_bytes"] = 3 * 10**12
    host["memory"]["total_bytes"] = memory.get("ram", 600 * 10**9)
    return host


def gpu(index: int, name: str, mib: int, cc: str | None = "8.9") -> dict:
    return {"index": index, "name": name, "memory_mib": mib, "compute_capability": cc}


# --- #2 kt-kernel thread pools: pool i on NUMA node i, threads split evenly -----------------------------
def two_nodes(node_cores: dict[int, int], threads_per_core: int = 1) -> dict:
    host = h100()
    cores = sum(node_cores.values())
    host["cpu"].update(
        physical_cores=cores,
        logical_cpus=cores * threads_per_core,
        threads_per_core=threads_per_core,
        numa_node_physical_cores={str(node): count for node, count in node_cores.items()},
        numa_nodes=len(node_cores),
    )
    return host


def test_cores_on_node_1_only_warn_that_kt_kernel_binds_node_0(tmp_path):
    capture = tmp_path / "n1"
    shutil.copytree(FIXTURES / "hosts" / "synthetic-2s-8470q-amx", capture)
    (capture / "cgroup.txt").write_text("/sys/fs/cgroup/cpuset.cpus.effective: 52-103\n")
    result = plan(facts_module.from_capture(capture), "Qwen3-30B-A3B", "serve")
    assert result["serve"]["kt_threadpool_count"] == 1
    warning = next(w for w in result["warnings"] if "kt-kernel binds" in w)
    assert "node 0, whose CPUs this process may not use" in warning and "--kt-numa-nodes 1" in warning


def test_a_node_with_too_few_cores_for_its_share_gets_no_pool():
    # cpuset 0-50,52: 51 cores on node 0, 1 on node 1; two pools would put 25 threads on that 1 core
    result = plan(two_nodes({0: 51, 1: 1}), "Qwen3-30B-A3B", "serve")
    assert (result["serve"]["kt_threadpool_count"], result["serve"]["kt_cpuinfer"]) == (1, 50)
    assert any("node(s) 1 idle" in w for w in result["warnings"])


def test_uneven_nodes_cap_the_threads_at_an_even_split():
    result = plan(two_nodes({0: 52, 1: 40}, threads_per_core=2), "Qwen3-30B-A3B", "serve")
    assert (result["serve"]["kt_threadpool_count"], result["serve"]["kt_cpuinfer"]) == (2, 80)
    assert any("12 of 92 worker threads unused" in w for w in result["warnings"])
    assert "92 cut to 80" in result["reasons"]["kt_cpuinfer"]


def test_even_nodes_get_one_pool_each_and_no_warning():
    result = plan(two_nodes({0: 52, 1: 52}, threads_per_core=2), "Qwen3-30B-A3B", "serve")
    assert (result["serve"]["kt_threadpool_count"], result["serve"]["kt_cpuinfer"]) == (2, 104)
    assert result["warnings"] == []
    assert result["serve"]["numa_cpus"] is None and "cpuset" in result["reasons"]["numa_cpus"]
