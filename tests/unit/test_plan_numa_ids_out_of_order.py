"""A --kt-numa-nodes list that is not hwloc's order 0..n-1 with every id below the pool count (1 0, or 0 0:
a user's kt_serve_overrides, never the planner's own, which lists the pools' nodes ascending) went without a
word, though kt-kernel 0.7.2 binds the memory of pool i's distributor thread to hwloc node i whatever id
the list names (cpu_backend/worker_pool.cpp:287 and :385-387), while the pool's other workers bind to the
named node: part of each pool's weights lands away from its threads, on a node the per-node memory check
did not look at for it. numa_ids_out_of_order names the pools, the upstream lines and the remedy. The
capture: the synthetic dual-socket host (SYNTHETIC, no machine was captured), 2 nodes, mems 0-1."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktinfra import facts
from ktinfra.plan.host import hwloc_nodes, numa_ids_out_of_order, numa_ids_past_pools

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


@pytest.fixture(scope="module")
def order() -> list[int]:
    nodes = hwloc_nodes(facts.from_capture(HOSTS / "synthetic-2s-8470q-amx"))
    assert nodes == [0, 1]
    return nodes


def test_a_swapped_list_is_warned_with_the_upstream_lines_and_the_remedy(order):
    warning = numa_ids_out_of_order([1, 0], order)
    assert warning.startswith("kt_numa_nodes 1 0 is not hwloc's order 0..1: ")
    assert (
        "pool 0 runs on hwloc node 1 (kernel node 1), its distributor binds to hwloc node 0 (kernel node 0);"
        in (warning)
    )
    assert "pool 1 runs on hwloc node 0 (kernel node 0), its distributor binds to hwloc node 1" in warning
    for line in ("worker_pool.cpp:287", ":385-387", "worker_pool.h:35-49", "worker_pool.h:28-33"):
        assert line in warning
    assert "per-node memory check" in warning
    assert warning.endswith(
        "leave kt_numa_nodes null: kt-kernel's default 0..n-1 names the same nodes, "
        "and the pools split every expert evenly, so their order gains nothing"
    )


def test_one_node_named_twice_is_warned(order):
    warning = numa_ids_out_of_order([0, 0], order)
    assert "pool 1 runs on hwloc node 0 (kernel node 0), its distributor binds to hwloc node 1" in warning
    assert "pool 0 runs" not in warning  # pool 0's threads and distributor agree
    assert warning.endswith("name each pool's node once, in ascending order (or null for 0..n-1)")


def test_without_the_order_the_indices_are_named_alone():
    warning = numa_ids_out_of_order([1, 0])
    assert "pool 0 runs on hwloc node 1, its distributor binds to hwloc node 0;" in warning
    assert "kernel node" not in warning


@pytest.mark.parametrize("ids", [None, [], [0], [0, 1]])
def test_hwloc_s_own_order_is_not_warned(order, ids):
    assert numa_ids_out_of_order(ids, order) is None


@pytest.mark.parametrize("ids", [[1], [0, 2], [2, 0]])
def test_an_id_past_the_pools_is_the_other_warning_s(order, ids):
    assert numa_ids_out_of_order(ids, order) is None
    assert numa_ids_past_pools(ids, ids) is not None  # one warning per list, not two
