"""kt-kernel 0.7.2 cpu_backend/worker_pool.cpp (WorkerPool::init, NumaJobDistributor::init) sizes
numa_threads_count by the pool count and indexes it by each --kt-numa-nodes id, so an id at or past the pool
count reads and writes past the vector. The plan gave `kt_numa_nodes [1]` for one pool (a container pinned
to node 1's CPUs with mems 0-1, test_numa_container_node1.py) and said nothing of it; it now keeps the layout
and warns, naming the file, the functions and the remedy (a cpuset whose mems hold node 1 alone: hwloc's
node 0)."""

from __future__ import annotations

from test_numa_container_node1 import node1_container

from ktinfra.planner import plan


def overrun_warnings(result: dict) -> list[str]:
    return [w for w in result["warnings"] if "numa_threads_count" in w or "WorkerPool::init" in w]


def test_one_pool_on_node_1_is_warned(tmp_path):
    result = plan(node1_container(tmp_path, "0-1"), "Qwen3-30B-A3B", "serve")
    assert result["feasible"], result["problems"]  # kept: the plan still serves
    assert result["serve"]["kt_numa_nodes"] == [1]
    warning = overrun_warnings(result)
    assert len(warning) == 1, result["warnings"]  # was: none
    for words in (
        "cpu_backend/worker_pool.cpp",
        "WorkerPool::init and NumaJobDistributor::init",
        "id(s) 1 read and write past its end",
        "docker run --cpuset-mems 1",
        "AllowedMemoryNodes=1 in kt_serve_unit_dropin",
        "kt_serve_overrides {kt_numa_nodes: null}",  # was 'overridden to null', which the role refused
    ):
        assert words in warning[0], warning[0]
    assert "see warnings" in result["reasons"]["kt_numa_nodes"]


def test_with_mems_of_node_1_alone_nothing_is_named_or_warned(tmp_path):
    result = plan(node1_container(tmp_path, "1"), "Qwen3-30B-A3B", "serve")
    assert result["serve"]["kt_numa_nodes"] is None
    assert not overrun_warnings(result)


def test_ids_below_the_pool_count_are_not_warned():
    from ktinfra.plan.host import numa_ids_past_pools

    assert numa_ids_past_pools(None, [0, 1]) is None
    assert numa_ids_past_pools([1, 0], [1, 0]) is None  # both within a 2-entry vector
    warning = numa_ids_past_pools([2, 3], [2, 3])
    assert warning and "id(s) 2, 3 read and write past its end" in warning
    assert "--cpuset-mems 2,3" in warning and "AllowedMemoryNodes=2,3" in warning
