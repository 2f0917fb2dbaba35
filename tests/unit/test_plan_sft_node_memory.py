"""Fine-tuning's kt-kernel pools split the CPU experts as serving's do (kt-kernel 0.7.2
operators/moe-sft-tp.hpp: TP_MOE_SFT is moe-tp.hpp's TP_MOE, one intermediate slice per NUMA pool, loaded in
that pool's NUMA job): each pool's slice must fit its node's memory (memory.numa_node_bytes). Host:
synthetic-2s-8470q-unbalanced (SYNTHETIC: node 0 404 GB, node 1 135 GB, 52 cores each)."""

from __future__ import annotations

from pathlib import Path

from ktinfra import facts
from ktinfra.planner import plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def unbalanced() -> dict:
    return facts.from_capture(HOSTS / "synthetic-2s-8470q-unbalanced")


def test_a_slice_the_small_node_cannot_hold_is_refused():
    """Qwen3-235B-A22B BF16: 483 GB of RAM fit the host's 539 GB, 2 x 227 GB of experts do not fit node 1,
    and 454 GB do not fit node 0 alone."""
    host = unbalanced()
    result = plan(host, "Qwen3-235B-A22B", "sft")
    assert result["requirements"]["ram_bytes"] < host["memory"]["total_bytes"]
    assert not result["feasible"]
    problem = next(p for p in result["problems"] if "thread pool" in p)
    assert "227 GB (454 GB / 2)" in problem and "node 1 has 135 GB" in problem
    assert "fine-tune on a host whose nodes hold the share" in problem
    assert "--cpu-format" not in problem  # serving's option; fine-tuning has none


def test_pools_drop_to_node_0_when_node_1_cannot_hold_its_slice():
    host = unbalanced()
    host["memory"]["numa_node_bytes"]["1"] = 20 * 10**9  # Qwen3-30B-A3B's slice is ~31 GB
    result = plan(host, "Qwen3-30B-A3B", "sft")
    kt = result["sft"]["kt"]["kt_config"]
    assert result["feasible"], result["problems"]
    assert (kt["kt_threadpool_count"], kt["kt_num_threads"], kt["kt_tp_enabled"]) == (1, 52, False)
    assert any("which node(s) 1 cannot hold" in w for w in result["warnings"]), result["warnings"]


def test_slices_both_nodes_hold_keep_both_pools():
    result = plan(unbalanced(), "Qwen3-30B-A3B", "sft")
    kt = result["sft"]["kt"]["kt_config"]
    assert result["feasible"], result["problems"]
    assert (kt["kt_threadpool_count"], kt["kt_num_threads"]) == (2, 104)


def test_without_node_memory_nothing_changes():
    host = unbalanced()
    host["memory"]["numa_node_bytes"] = None
    result = plan(host, "Qwen3-235B-A22B", "sft")
    assert result["feasible"], result["problems"]
    assert result["sft"]["kt"]["kt_config"]["kt_threadpool_count"] == 2
