"""The largest values a real host can report, shared by the capture parsers and the facts validation.

A capture or facts file beyond them is damaged (or hand-made): the parsers read such a value as unknown and
`plan` refuses it, instead of carrying a 400-digit number into float arithmetic.
"""

from __future__ import annotations

from ktinfra.facts.cpulist import MAX_CPUS

MAX_NUMA_NODES = 1024  # the kernel's MAX_NUMNODES (NODES_SHIFT 10)
MAX_THREADS_PER_CORE = 8  # SMT8 (POWER); x86 has at most 2
MAX_MEMORY_BYTES = 1 << 60  # 1 EiB, far above x86-64's 4 PiB physical address space
MAX_DISK_BYTES = 1 << 64  # statfs counts are 64-bit
MAX_GPU_MEMORY_MIB = 1 << 24  # 16 TiB
MAX_GPU_INDEX = 1 << 16  # also MIG instance indices and GPU/compute instance ids
MAX_GPU_MULTIPROCESSORS = 1 << 16  # SMs of a MIG instance (an H100 has 132 in all)

__all__ = [
    "MAX_CPUS",
    "MAX_DISK_BYTES",
    "MAX_GPU_INDEX",
    "MAX_GPU_MEMORY_MIB",
    "MAX_GPU_MULTIPROCESSORS",
    "MAX_MEMORY_BYTES",
    "MAX_NUMA_NODES",
    "MAX_THREADS_PER_CORE",
    "within",
]


def within(value: int | None, low: int, high: int) -> int | None:
    """value when low <= value <= high, else None (unknown)."""
    return value if value is not None and low <= value <= high else None
