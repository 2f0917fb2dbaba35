"""`memory.numa_node_bytes`: the memory of each NUMA node, where kt-kernel puts each thread pool's experts."""

from __future__ import annotations

import re
from typing import NamedTuple

from ktinfra.facts.bounds import MAX_MEMORY_BYTES, MAX_NUMA_NODES, within
from ktinfra.facts.cpulist import parse_cpulist

MIB = 1 << 20
# Node sizes must add up to MemTotal (the kernel counts both from the same managed pages); numactl rounds
# each node down to a MiB. The Firecracker VMs' node0 shows only touched memory (4699 MB of 252 GiB).
AGREEMENT = 0.02
NODE_LINE = re.compile(r"^Node (\d{1,4}) (MemTotal|HugePages_Total):\s+(\d{1,20})(\s*kB)?\s*$", re.M)
# node-hugepages.txt: `grep -H . /sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages`, every
# page size (node meminfo's HugePages_Total counts the default size only, not 1 GiB pages beside 2 MiB ones)
NODE_PAGES = re.compile(
    r"/node(\d{1,4})/hugepages/hugepages-(\d{1,10})kB/nr_hugepages:\s*(\d{1,20})\s*$", re.M
)


class NodeMemory(NamedTuple):
    usable: dict[str, int] | None  # {node: bytes a process can allocate there}: MemTotal less huge pages
    totals: dict[str, int] | None  # {node: MemTotal}: 0 only on a memoryless node
    source: str | None  # the file they come from, or why they are None


def node_memory(files: dict[str, str], meminfo: dict[str, int]) -> NodeMemory:
    """Each node's memory, or None (and why not, where a file was there but not taken).

    From node-meminfo.txt (/sys/devices/system/node/node*/meminfo: each node's MemTotal), else `numactl
    --hardware`'s 'node N size: X MB'. Kept only when they add up to MemTotal. Each node's huge page pool is
    left out of `usable` (ordinary allocations, the experts', cannot use it): every page size from
    node-hugepages.txt, else the default size's from node-meminfo.txt. `totals` keeps it: a node whose
    memory is all huge pages is still a node with memory (hwloc counts it), unlike a memoryless one."""
    total = meminfo.get("MemTotal")
    found = _sysfs_nodes(files.get("node-meminfo.txt"), meminfo.get("Hugepagesize", 0))
    source = "node-meminfo.txt"
    if not found:
        found, source = _numactl_nodes(files.get("numactl-hardware.txt")), "numactl-hardware.txt"
    if not found:
        return NodeMemory(None, None, None)
    pools = _huge_page_pools(files.get("node-hugepages.txt"))
    if pools:
        found = {node: (size, min(pools.get(node, 0), size)) for node, (size, _) in found.items()}
    if total is None:
        return NodeMemory(None, None, f"ignored: {source} without a MemTotal to check it against")
    listed = sum(size for size, _ in found.values())
    if abs(listed - total) > AGREEMENT * total:
        why = (
            f"ignored: {source}'s nodes add up to {listed // MIB} MiB, MemTotal is {total // MIB} MiB "
            "(the Firecracker VMs' nodes show only touched memory)"
        )
        return NodeMemory(None, None, why)
    nodes = sorted(found.items())
    usable = {str(node): max(size - pool, 0) for node, (size, pool) in nodes}
    return NodeMemory(usable, {str(node): size for node, (size, _) in nodes}, source)


def _sysfs_nodes(text: str | None, page_bytes: int) -> dict[int, tuple[int, int]]:
    """{node: (MemTotal, huge page pool)} of `Node N MemTotal: X kB` / `Node N HugePages_Total: N` lines."""
    sizes: dict[int, int] = {}
    pages: dict[int, int] = {}
    for match in NODE_LINE.finditer(text or ""):
        node = int(match.group(1))
        if node >= MAX_NUMA_NODES:
            continue
        value = int(match.group(3)) * (1024 if match.group(4) else 1)
        (sizes if match.group(2) == "MemTotal" else pages)[node] = value
    return {
        node: (size, min(pages.get(node, 0) * page_bytes, size))
        for node, size in sizes.items()
        if within(size, 0, MAX_MEMORY_BYTES) is not None
    }


def _huge_page_pools(text: str | None) -> dict[int, int]:
    """{node: bytes of its huge pages, every size} from node-hugepages.txt ({} when it lists none)."""
    pools: dict[int, int] = {}
    for match in NODE_PAGES.finditer(text or ""):
        node, page_kib, count = (int(group) for group in match.groups())
        if node < MAX_NUMA_NODES:
            pools[node] = min(pools.get(node, 0) + count * page_kib * 1024, MAX_MEMORY_BYTES)
    return pools


def _numactl_nodes(text: str | None) -> dict[int, tuple[int, int]]:
    found = {}
    for match in re.finditer(r"^node (\d{1,4}) size: (\d{1,12}) MB\s*$", text or "", re.M):
        node, size = int(match.group(1)), int(match.group(2)) * MIB
        if node < MAX_NUMA_NODES and within(size, 0, MAX_MEMORY_BYTES) is not None:
            found[node] = (size, 0)
    return found


def allowed_node_bytes(nodes: dict[str, int] | None, files: dict[str, str]) -> int | None:
    """The memory of the nodes this process may allocate on (Mems_allowed_list), where that leaves a node out;
    None when every node is allowed, either is unknown, or no allowed node is among the nodes (nothing to
    go by)."""
    status = files.get("proc-self-status.txt") or ""
    listed = re.search(r"^Mems_allowed_list:\s*(\S+)\s*$", status, re.M)
    allowed = parse_cpulist(listed.group(1)) if listed else None
    if not nodes or not allowed or {int(node) for node in nodes} <= allowed:
        return None
    return sum(size for node, size in nodes.items() if int(node) in allowed) or None
