"""kt-kernel splits every CPU expert evenly over its thread pools and keeps each pool's slice in its own NUMA
node's memory: the plan checks that slice against each pool's node, and names pools by hwloc's index."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from ktinfra import facts
from ktinfra.planner import PlanInputError, plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def unbalanced() -> dict:
    """node 0 404 GB, node 1 135 GB, 52 cores each, 2 x L40S"""
    return facts.from_capture(HOSTS / "synthetic-2s-8470q-unbalanced")


def test_a_pool_share_the_small_node_cannot_hold_is_refused():
    result = plan(unbalanced(), "Qwen3-235B-A22B", "serve", cpu_format="BF16")
    assert result["requirements"]["ram_bytes"] < unbalanced()["memory"]["total_bytes"]  # the total fits
    assert not result["feasible"]
    problem = next(p for p in result["problems"] if "thread pool" in p)
    assert "227 GB (454 GB / 2)" in problem and "node 1 has 135 GB" in problem


def test_pools_drop_to_the_nodes_that_hold_their_share():
    result = plan(unbalanced(), "DeepSeek-V3", "serve", cpu_format="AMXINT4")
    serve = result["serve"]
    assert result["feasible"], result["problems"]
    assert (serve["kt_threadpool_count"], serve["kt_cpuinfer"], serve["kt_numa_nodes"]) == (1, 52, None)
    warning = next(w for w in result["warnings"] if "cannot hold" in w)
    assert "slice (163 GB)" in warning and "which node(s) 1 cannot hold" in warning


def test_a_share_both_nodes_hold_keeps_both_pools():
    result = plan(unbalanced(), "Qwen3-235B-A22B", "serve")
    assert result["feasible"], result["problems"]
    assert (result["serve"]["kt_threadpool_count"], result["serve"]["kt_cpuinfer"]) == (2, 104)


def test_without_node_memory_the_pools_are_planned_as_before():
    host = unbalanced()
    host["memory"]["numa_node_bytes"] = None
    result = plan(host, "DeepSeek-V3", "serve", cpu_format="AMXINT4")
    assert result["feasible"] and result["serve"]["kt_threadpool_count"] == 2


def test_a_node_without_memory_gets_no_pool():
    host = unbalanced()
    host["memory"]["numa_node_bytes"] = {"0": host["memory"]["total_bytes"], "1": 0}
    host["cpu"]["memory_nodes_allowed"] = None  # the capture lacked Mems_allowed_list
    result = plan(host, "Qwen3-30B-A3B", "serve")
    assert result["feasible"], result["problems"]
    assert (result["serve"]["kt_threadpool_count"], result["serve"]["kt_numa_nodes"]) == (1, None)


def _renumbered(host: dict, numbers: dict[str, str]) -> dict:
    """The host with its NUMA nodes numbered as `numbers` says (a machine whose node ids skip one)."""
    host = copy.deepcopy(host)
    cpu = host["cpu"]
    for key in ("numa_node_cpus", "numa_node_physical_cores"):
        cpu[key] = {numbers[node]: value for node, value in cpu[key].items()}
    memory = host["memory"]["numa_node_bytes"]
    host["memory"]["numa_node_bytes"] = {numbers[node]: value for node, value in memory.items()}
    cpu["memory_nodes_allowed"] = ",".join(sorted(numbers.values()))
    return host


def test_nodes_0_and_2_are_hwloc_indices_0_and_1():
    """kt-kernel finds a pool's node with hwloc_get_obj_by_type(HWLOC_OBJ_NUMANODE, id): index 2 of a host
    with two nodes finds none, so --kt-numa-nodes 0 2 would leave pool 1 unbound."""
    host = _renumbered(facts.from_capture(HOSTS / "synthetic-2s-8470q-amx"), {"0": "0", "1": "2"})
    serve = plan(host, "Qwen3-30B-A3B", "serve")["serve"]
    assert (serve["kt_threadpool_count"], serve["kt_numa_nodes"]) == (2, None)


def test_a_pool_on_node_2_alone_is_hwloc_index_1():
    host = _renumbered(facts.from_capture(HOSTS / "synthetic-2s-8470q-amx"), {"0": "0", "1": "2"})
    host["cpu"]["usable_cpus"] = "52-103"
    host["cpu"]["numa_node_cpus"] = {"2": "52-103"}
    host["cpu"]["numa_node_physical_cores"] = {"2": 52}
    result = plan(host, "Qwen3-30B-A3B", "serve")
    assert result["serve"]["kt_numa_nodes"] == [1]
    assert "the kernel's node(s) 2" in result["reasons"]["kt_numa_nodes"]


@pytest.mark.parametrize("value", [-1, "1 GB", True])
def test_node_memory_of_the_wrong_type_is_refused(value):
    host = unbalanced()
    host["memory"]["numa_node_bytes"]["1"] = value
    with pytest.raises(PlanInputError, match=r"memory\.numa_node_bytes\.1"):
        plan(host, "Qwen3-30B-A3B", "serve")
