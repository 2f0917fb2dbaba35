"""Serve reasons that must agree with the numbers they explain (fresh-eyes review 5 of the serve planner)."""

import json
from pathlib import Path

from model_configs import GLM_4_5_AIR

from ktinfra.planner import load_facts, plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = {"name": "NVIDIA H200", "memory_mib": 143771, "compute_capability": "9.0"}


def six_h200(tmp_path: Path) -> tuple[dict, str]:
    """GLM-4.5-Air (96 heads) on 6 identical H200s: 6 divides the heads, yet TP is 4, a power of two."""
    host = load_facts(FIXTURES / "facts" / "h100-amx.json")
    host["gpus"] = [{"index": i, **H200} for i in range(6)]
    model = tmp_path / "GLM-4.5-Air"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(GLM_4_5_AIR))
    return host, str(model)


def test_gpus_left_out_of_tensor_parallel_are_explained_by_the_power_of_two_rule(tmp_path):
    host, model = six_h200(tmp_path)
    result = plan(host, model, "serve")
    serve, why = result["serve"], result["reasons"]["gpu_indices"]
    assert (serve["tensor_parallel_size"], serve["gpu_indices"]) == (4, [0, 1, 2, 3])
    # before: "the tensor-parallel size must divide the attention heads", which all 6 GPUs would (96 / 6)
    assert "must divide the attention heads" not in why
    assert "left out GPU 4" in why and "largest power of two <= 6 that divides 96 heads: 4" in why


def three_nodes(node_cores: dict[int, int]) -> dict:
    host = load_facts(FIXTURES / "facts" / "h100-amx.json")
    cores = sum(node_cores.values())
    host["cpu"].update(
        physical_cores=cores,
        logical_cpus=cores,
        threads_per_core=1,
        numa_node_physical_cores={str(node): count for node, count in node_cores.items()},
        numa_nodes=len(node_cores),
    )
    return host


def test_kt_numa_nodes_reason_names_only_the_default_nodes_the_pools_leave():
    """Pools on nodes 0 and 2 (node 1 has 2 cores): kt-kernel's default would be nodes 0 and 1, and only
    node 1 is the one to avoid; node 0 holds a pool."""
    result = plan(three_nodes({0: 8, 1: 2, 2: 8}), "Qwen3-30B-A3B", "serve")
    serve, why = result["serve"], result["reasons"]["kt_numa_nodes"]
    assert (serve["kt_threadpool_count"], serve["kt_numa_nodes"]) == (2, [0, 2])
    assert why.startswith("0 2: the pools' nodes, passed as --kt-numa-nodes")
    # before: "node(s) 0, 1 are not the ones holding the usable cores", though node 0 holds a pool
    assert "0, 1 are not" not in why
    assert "nodes 0-1" in why and "node(s) 1 " in why


def test_kt_numa_nodes_reason_for_a_container_on_the_second_socket_is_unchanged_in_substance():
    result = plan(three_nodes({0: 0, 1: 16}), "Qwen3-30B-A3B", "serve")
    assert result["serve"]["kt_numa_nodes"] == [1]
    why = result["reasons"]["kt_numa_nodes"]
    assert why.startswith("1: the pools' nodes, passed as --kt-numa-nodes") and "node(s) 0 " in why


def test_threadpool_reason_counts_the_nodes_the_cpus_sit_on_when_mems_leave_one_out():
    """Seed 002's host with a cpuset whose mems are node 0 only: the usable CPUs still sit on 2 nodes; the
    one pool goes on the node whose memory the process may allocate."""
    host = load_facts(FIXTURES / "facts" / "seed002-autodl-6430-4090.json")
    host["cpu"]["memory_nodes_allowed"] = "0"
    result = plan(host, "Qwen3-30B-A3B", "serve")
    assert result["serve"]["kt_threadpool_count"] == 1
    why = result["reasons"]["kt_threadpool_count"]
    # before: "1: the usable CPUs sit on 1 NUMA node(s)", beside a warning naming node 1's usable CPUs
    assert why.startswith(
        "1: the usable CPUs sit on 2 NUMA node(s), 1 of them with memory this process may allocate;"
    )
    assert any("NUMA node(s) 1 hold CPUs this process may use" in w for w in result["warnings"])
