"""Limits from cgroup.txt: `<path>: <value>` lines of cgroup v1 and v2 control files.

A capture may list several directories (the process's own cgroup and its ancestors); the effective limit is
the tightest one: the smallest CPU quota and memory limit, the intersection of the cpusets.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from ktinfra.facts.bounds import MAX_DISK_BYTES
from ktinfra.facts.cpulist import parse_cpulist

# memory.limit_in_bytes of an unlimited v1 cgroup is PAGE_COUNTER_MAX pages (9223372036854771712 with 4 KiB
# pages); anything this large means "no limit" whatever the page size.
UNLIMITED_BYTES = 1 << 62
# "<control file path>: <value>": the path holds a cgroup's, which may itself contain ':' (and ': '), so
# the line splits after the last "/<file name>:" (no value holds a '/')
LINE = re.compile(r"(?P<path>/(?:.*/)?[\w.]+): ?(?P<value>[^/]*)")


@dataclass(frozen=True)
class CgroupLimits:
    cpuset: set[int] | None
    quota_cpus: float | None
    memory_limit_bytes: int | None
    # what the tightest memory limit leaves: min over limited levels of limit - usage (the limit itself where
    # no usage was captured). Usage counts the level's page cache too, so this errs on the low side.
    memory_free_bytes: int | None = None


def parse_cgroup(text: str | None) -> CgroupLimits:
    by_dir: dict[str, dict[str, str]] = {}
    for line in (text or "").splitlines():
        match = LINE.fullmatch(line)
        if match is not None:
            path = match["path"]
            by_dir.setdefault(posixpath.dirname(path), {})[posixpath.basename(path)] = match["value"].strip()

    cpuset: set[int] | None = None
    quotas: list[float] = []
    memory: list[int] = []
    free: list[int] = []
    for files in by_dir.values():
        cpus = parse_cpulist(files.get("cpuset.cpus.effective") or files.get("cpuset.cpus"))
        if cpus:
            cpuset = cpus if cpuset is None else cpuset & cpus
        quota = _quota(files)
        if quota is not None:
            quotas.append(quota)
        # v1's memory.stat line `hierarchical_memory_limit N` also counts the ancestors a container cannot see
        limits = [
            _memory_limit(files.get("memory.max") or files.get("memory.limit_in_bytes")),
            _memory_limit(_stat_value(files.get("memory.stat"), "hierarchical_memory_limit")),
        ]
        limit = min((value for value in limits if value is not None), default=None)
        if limit is not None:
            memory.append(limit)
            usage = _bytes(files.get("memory.current") or files.get("memory.usage_in_bytes"))
            free.append(max(0, limit - usage) if usage is not None else limit)
    return CgroupLimits(
        cpuset,
        min(quotas) if quotas else None,
        min(memory) if memory else None,
        min(free) if free else None,
    )


def _quota(files: dict[str, str]) -> float | None:
    if "cpu.max" in files:
        quota, _, period = files["cpu.max"].partition(" ")
    else:
        quota, period = files.get("cpu.cfs_quota_us", ""), files.get("cpu.cfs_period_us", "")
    try:
        quota_us, period_us = int(quota), int(period or 100000)
    except ValueError:
        return None  # "max" (v2) or missing
    if not 0 < quota_us < 1 << 63 or not 0 < period_us < 1 << 63:
        return None  # -1 (v1 unlimited), or beyond the kernel's 64-bit counters
    return quota_us / period_us


def _stat_value(text: str | None, key: str) -> str | None:
    """The value of `key` in memory.stat lines ("key value"), as cgroup.txt keeps them."""
    for line in (text or "").splitlines():
        name, _, value = line.strip().partition(" ")
        if name == key:
            return value.strip()
    return None


def _memory_limit(value: str | None) -> int | None:
    limit = _bytes(value)  # None for "max" (v2) or missing
    return limit if limit is not None and 0 < limit < UNLIMITED_BYTES else None


def _bytes(value: str | None) -> int | None:
    try:
        number = int(value or "")
    except ValueError:
        return None
    return number if 0 <= number <= MAX_DISK_BYTES else None
