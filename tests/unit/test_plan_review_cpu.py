"""kt_cpuinfer against the CPUs the rest of a tensor-parallel server keeps busy, and mem_fraction_static on a
GPU smaller than the reserve (review pass)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from ktinfra.planner import load_facts, plan

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"


def _host(gpus: int, *, physical: int = 32, logical: int = 32) -> dict:
    """The H100 + AMX host's facts with `gpus` H100s and the given CPU counts (one NUMA node)."""
    host = load_facts(FACTS / "h100-amx.json")
    host["cpu"].update(
        physical_cores=physical,
        logical_cpus=logical,
        threads_per_core=logical // physical,
        usable_cpus=f"0-{logical - 1}",
        numa_node_cpus={"0": f"0-{logical - 1}"},
        cores_per_numa_node=physical,
    )
    host["gpus"] = [{**copy.deepcopy(host["gpus"][0]), "index": i} for i in range(gpus)]
    return host


@pytest.mark.parametrize("gpus,want", [(1, 30), (2, 29), (4, 27)])
def test_each_tensor_parallel_rank_beyond_the_first_keeps_one_more_cpu_free(gpus, want):
    # Every TP rank is a scheduler process spinning on its GPU through the decode step; the H100 measurement
    # (docs/results/2026-11-21-h100-amx) collapses whenever workers + busy processes fill every CPU.
    result = plan(_host(gpus), "Qwen3-235B-A22B", "serve")
    serve = result["serve"]
    assert serve["tensor_parallel_size"] == gpus
    assert serve["kt_cpuinfer"] == want
    assert serve["kt_cpuinfer"] + 1 + gpus == 32  # the submitting thread and one scheduler per rank
    if gpus > 1:
        assert f"the schedulers of the {gpus} tensor-parallel ranks" in result["reasons"]["kt_cpuinfer"]


def test_hyperthread_siblings_still_take_the_rank_schedulers():
    result = plan(_host(4, physical=32, logical=64), "Qwen3-235B-A22B", "serve")
    assert (result["serve"]["tensor_parallel_size"], result["serve"]["kt_cpuinfer"]) == (4, 32)
    assert "32 hyperthread sibling(s) are left" in result["reasons"]["kt_cpuinfer"]


def test_single_core_note_does_not_claim_free_siblings():
    result = plan(_host(1, physical=1, logical=1), "Qwen3-30B-A3B", "serve")
    assert result["serve"]["kt_cpuinfer"] == 1
    reason = result["reasons"]["kt_cpuinfer"]
    assert "hyperthread sibling(s) are left" not in reason and "only core" in reason


@pytest.mark.parametrize("memory_mib", [1, 1024, 1430])
def test_a_gpu_smaller_than_the_reserve_gets_no_fraction_outside_0_1(memory_mib):
    host = _host(1)
    host["gpus"][0]["memory_mib"] = memory_mib
    result = plan(host, "Qwen3-30B-A3B", "serve")
    assert 0 < result["serve"]["mem_fraction_static"] < 1
    assert not result["feasible"]
    assert any("runtime reserve" in problem for problem in result["problems"])
