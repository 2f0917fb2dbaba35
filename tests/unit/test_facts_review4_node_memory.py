"""memory.numa_node_bytes: the memory of each NUMA node, where kt-kernel keeps a pool's expert slice."""

from __future__ import annotations

import shutil
from pathlib import Path

from ktinfra import facts
from ktinfra.facts.capture import SOURCES

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
UNBALANCED = HOSTS / "synthetic-2s-8470q-unbalanced"


def test_node_meminfo_gives_each_nodes_memory():
    memory = facts.from_capture(UNBALANCED)["memory"]
    assert memory["numa_node_bytes"] == {"0": 394_720_112 * 1024, "1": 131_536_204 * 1024}
    assert memory["numa_node_bytes_source"] == "node-meminfo.txt"
    assert sum(memory["numa_node_bytes"].values()) == memory["meminfo_total_bytes"]


def test_without_node_meminfo_numactls_sizes_are_read_in_mib(tmp_path):
    copy = tmp_path / "capture"
    shutil.copytree(UNBALANCED, copy)
    (copy / "node-meminfo.txt").unlink()
    memory = facts.from_capture(copy)["memory"]
    assert memory["numa_node_bytes"] == {"0": (394_720_112 // 1024) << 20, "1": (131_536_204 // 1024) << 20}
    assert memory["numa_node_bytes_source"] == "numactl-hardware.txt"


def test_a_nodes_huge_pages_are_left_out_of_its_memory():
    meminfo = "MemTotal:  8388608 kB\nHugePages_Total:  1024\nHugepagesize:  2048 kB\n"
    nodes = (
        "Node 0 MemTotal:  4194304 kB\nNode 0 HugePages_Total:  1024\n"
        "Node 1 MemTotal:  4194304 kB\nNode 1 HugePages_Total:     0\n"
    )
    memory = facts.parse_files({"meminfo.txt": meminfo, "node-meminfo.txt": nodes}, "t")["memory"]
    assert memory["numa_node_bytes"] == {"0": 2 << 30, "1": 4 << 30}


def test_firecracker_node_sizes_that_miss_memtotal_are_ignored():
    """The real GPU captures' numactl shows 4699 MB on a 252 GiB VM: not the node's memory."""
    memory = facts.from_capture(HOSTS / "2xh200-xeon-amx-32c")["memory"]
    assert memory["numa_node_bytes"] is None
    why = "ignored: numactl-hardware.txt's nodes add up to 4699 MiB, MemTotal is 257811 MiB"
    assert memory["numa_node_bytes_source"].startswith(why)


def test_a_capture_without_node_sizes_says_nothing():
    memory = facts.from_capture(HOSTS / "epyc-2c-nogpu")["memory"]
    assert (memory["numa_node_bytes"], memory["numa_node_bytes_source"]) == (None, None)


def test_the_capture_records_node_meminfo():
    assert "node-meminfo.txt" in SOURCES
