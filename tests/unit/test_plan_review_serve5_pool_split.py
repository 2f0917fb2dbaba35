"""kt-kernel splits every expert's width evenly over the thread pools (operators/moe-tp.hpp: "For TP,
intermediate_size must be a multiple of NUMA node count", thrown at load): a pool count that does not divide
the width must not be planned (review 5 of the serve planner)."""

from pathlib import Path

import pytest

from ktinfra.planner import load_facts, plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def three_nodes() -> dict:
    """48 cores on three NUMA nodes of 16 (e.g. SNC3), room for any model."""
    host = load_facts(FIXTURES / "facts" / "h100-amx.json")
    host["cpu"].update(
        physical_cores=48,
        logical_cpus=48,
        threads_per_core=1,
        numa_node_physical_cores={"0": 16, "1": 16, "2": 16},
        numa_nodes=3,
    )
    host["memory"]["total_bytes"] = 4 * 10**12
    host["disks"][0]["avail_bytes"] = 10**14
    return host


@pytest.mark.parametrize("stack", ["kt-0.7", "kt-0.4-autodl"])
@pytest.mark.parametrize(("model", "width"), [("DeepSeek-V3", 2048), ("DeepSeek-V2-Lite", 1408)])
def test_pools_never_split_the_expert_width_unevenly(model, width, stack):
    result = plan(three_nodes(), model, "serve", stack=stack)
    serve = result["serve"]
    # before: 3 pools of 15-16 threads; kt-kernel stops loading the experts (2048 % 3, 1408 % 3)
    assert width % serve["kt_threadpool_count"] == 0
    assert (serve["kt_threadpool_count"], serve["kt_cpuinfer"]) == (2, 32)
    warning = next(w for w in result["warnings"] if "equal slice" in w)
    assert "3 pools would run 46 threads" in warning and f"{width} is not a multiple of 3" in warning
    assert "takes an equal slice of the experts" in result["reasons"]["kt_cpuinfer"]


@pytest.mark.parametrize("model", ["Qwen3-30B-A3B", "Qwen3-235B-A22B"])  # 768 and 1536: 3 divides them
def test_widths_that_three_pools_divide_keep_three_pools(model):
    result = plan(three_nodes(), model, "serve")
    assert (result["serve"]["kt_threadpool_count"], result["serve"]["kt_cpuinfer"]) == (3, 46)
    assert not any("equal slice" in w for w in result["warnings"])
