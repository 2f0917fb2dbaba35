"""Serving's pools (--kt-numa-nodes names their nodes) went only on the first k nodes by usable cores, so a
node that cannot hold a pool's share of the experts, first in that order, kept every count out: the plan was
infeasible ("no fewer pools fit either") although one pool on another node would hold the experts. The
captures: the synthetic unbalanced dual-socket host (SYNTHETIC, no machine was captured; node 0 404 GB,
node 1 135 GB, 52 cores each) with a cpuset leaving node 0 48 cores, and ca7c197's memoryless node 0 (all
539 GB on node 1) from a capture without Mems_allowed_list."""

from __future__ import annotations

import shutil
from pathlib import Path

from test_numa_hwloc_unseen_node import memoryless_node0

from ktinfra import facts
from ktinfra.planner import plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
CPUS = "4-51,108-155,52-103,156-207"  # node 0: cores 4-51 (48), node 1: all 52


def node0_with_fewer_cores(tmp_path: Path) -> dict:
    capture = tmp_path / "node0-48-cores"
    shutil.copytree(HOSTS / "synthetic-2s-8470q-unbalanced", capture)
    (capture / "cgroup.txt").write_text(
        f"/sys/fs/cgroup/cpuset.cpus.effective: {CPUS}\n/sys/fs/cgroup/cpuset.mems.effective: 0-1\n"
    )
    (capture / "proc-self-status.txt").write_text(f"Cpus_allowed_list:\t{CPUS}\nMems_allowed_list:\t0-1\n")
    return facts.from_capture(capture)


def test_the_node_that_holds_the_experts_takes_the_pool(tmp_path):
    """DeepSeek-V3 AMXINT4, 327 GB of experts: 2 x 163 GB do not fit node 1's 135 GB, nor does 1 x 327 GB on
    node 1 (52 cores, first by cores); node 0 (48 cores, 404 GB) holds them."""
    host = node0_with_fewer_cores(tmp_path)
    assert host["cpu"]["numa_node_physical_cores"] == {"0": 48, "1": 52}
    result = plan(host, "DeepSeek-V3", "serve", cpu_format="AMXINT4")
    serve = result["serve"]
    assert result["feasible"], result["problems"]  # was: no fewer pools fit either
    assert (serve["kt_threadpool_count"], serve["kt_cpuinfer"], serve["kt_numa_nodes"]) == (1, 48, None)
    warning = next(w for w in result["warnings"] if "cannot hold" in w)
    assert "1 pool(s) on node(s) 0 hold theirs (327 GB each)" in warning


def test_a_share_both_nodes_hold_still_takes_both(tmp_path):
    result = plan(node0_with_fewer_cores(tmp_path), "Qwen3-30B-A3B", "serve")
    assert result["feasible"], result["problems"]
    assert (result["serve"]["kt_threadpool_count"], result["serve"]["kt_cpuinfer"]) == (2, 96)


def test_a_share_no_node_holds_is_still_refused(tmp_path):
    """Qwen3-235B-A22B BF16, 454 GB: more than either node, 2 x 227 GB more than node 1."""
    result = plan(node0_with_fewer_cores(tmp_path), "Qwen3-235B-A22B", "serve", cpu_format="BF16")
    assert not result["feasible"]
    assert any("no fewer pools fit either" in p for p in result["problems"]), result["problems"]


def test_a_memoryless_node_gets_no_pool(tmp_path):
    """Node 0 has CPUs and no memory; node 1 holds all 539 GB: Qwen3-235B-A22B's 227 GB of AMXINT8 experts
    fit there in one pool, which hwloc (node 1 its only node) numbers 0."""
    result = plan(memoryless_node0(tmp_path, mems=None), "Qwen3-235B-A22B", "serve")
    serve = result["serve"]
    assert result["feasible"], result["problems"]  # was: node 0 has 0.0 GB; no fewer pools fit either
    assert (serve["kt_threadpool_count"], serve["kt_cpuinfer"], serve["kt_numa_nodes"]) == (1, 52, None)
    assert any("node(s) 0 idle" in w for w in result["warnings"]), result["warnings"]
