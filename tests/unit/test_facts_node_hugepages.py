"""memory.numa_node_bytes leaves out each node's huge pages of every size. A node's meminfo counts only the
default size's pages (HugePages_Total), so 1 GiB pages reserved beside 2 MiB ones (hugepagesz=1G
hugepages=N, or nr_hugepages under hugepages-1048576kB) stayed in the node's memory, where the plan put
kt-kernel's expert slices. The capture now records every size per node (node-hugepages.txt, as
`grep -H . /sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages` prints it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ktinfra import facts
from ktinfra.facts.capture import SOURCES
from ktinfra.planner import plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "capture_host.sh"
GIB = 1 << 30
MEMINFO = "MemTotal:  8388608 kB\nHugePages_Total:  512\nHugepagesize:  2048 kB\nHugetlb:  3145728 kB\n"
NODES = (
    "Node 0 MemTotal:  4194304 kB\nNode 0 HugePages_Total:   512\n"
    "Node 1 MemTotal:  4194304 kB\nNode 1 HugePages_Total:     0\n"
)


def pages(node: int, size_kib: int, count: int) -> str:
    return f"/sys/devices/system/node/node{node}/hugepages/hugepages-{size_kib}kB/nr_hugepages:{count}\n"


def test_1gib_pages_are_left_out_of_their_nodes_memory():
    """node 0: 512 x 2 MiB (1 GiB); node 1: 2 x 1 GiB; each node 4 GiB."""
    listing = pages(0, 1048576, 0) + pages(0, 2048, 512) + pages(1, 1048576, 2) + pages(1, 2048, 0)
    files = {"meminfo.txt": MEMINFO, "node-meminfo.txt": NODES, "node-hugepages.txt": listing}
    memory = facts.parse_files(files, "t")["memory"]
    assert memory["numa_node_bytes"] == {"0": 3 * GIB, "1": 2 * GIB}
    assert memory["total_bytes"] == 5 * GIB  # Hugetlb: every size, as before


def test_without_the_listing_the_default_size_is_left_out_as_before():
    memory = facts.parse_files({"meminfo.txt": MEMINFO, "node-meminfo.txt": NODES}, "t")["memory"]
    assert memory["numa_node_bytes"] == {"0": 3 * GIB, "1": 4 * GIB}


def test_numactls_sizes_lose_the_huge_pages_too():
    numactl = "available: 2 nodes (0-1)\nnode 0 size: 4096 MB\nnode 1 size: 4096 MB\n"
    listing = pages(1, 1048576, 2)
    files = {"meminfo.txt": MEMINFO, "numactl-hardware.txt": numactl, "node-hugepages.txt": listing}
    assert facts.parse_files(files, "t")["memory"]["numa_node_bytes"] == {"0": 4 * GIB, "1": 2 * GIB}


def test_the_plan_checks_the_slices_against_what_the_pages_leave(tmp_path):
    """synthetic-2s-8470q-unbalanced (SYNTHETIC) with 100 x 1 GiB pages reserved on node 0: 404 - 107 = 297 GB
    there. DeepSeek-V3 AMXINT4's 327 GB of experts fit one pool on node 0 before, not now."""
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / "synthetic-2s-8470q-unbalanced", capture)
    (capture / "node-hugepages.txt").write_text(pages(0, 1048576, 100) + pages(1, 1048576, 0))
    found = facts.from_capture(capture)
    assert found["memory"]["numa_node_bytes"]["0"] == 404193394688 - 100 * GIB
    result = plan(found, "DeepSeek-V3", "serve", cpu_format="AMXINT4")
    assert not result["feasible"]
    assert any("memory per node 0: 297 GB, 1: 135 GB" in p for p in result["problems"]), result["problems"]


def test_the_capture_records_every_page_size_per_node():
    listing = SOURCES["node-hugepages.txt"]()
    sizes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*/hugepages/hugepages-*kB/nr_hugepages"))
    assert sizes, "this machine shows no per-node huge page sizes in sysfs"
    assert [line.split(":")[0] for line in listing.splitlines()] == [str(path) for path in sizes]


def test_the_raw_snapshot_records_them_too(tmp_path):
    """benchmarks/capture_host.sh without ktinfra (a python3 that cannot import it): the same listing."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to("/bin/false")
    env = {**os.environ, "PATH": f"{bare}:/usr/bin:/bin", "PYTHONPATH": ""}
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "cap")], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "cap" / "node-hugepages.txt").read_text() == SOURCES["node-hugepages.txt"]()
