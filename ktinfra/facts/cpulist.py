"""Linux CPU-list strings ("0-15,32-47") to sets of CPU ids and back."""

from __future__ import annotations

from collections.abc import Iterable

MAX_CPUS = 8192  # the kernel's CONFIG_NR_CPUS limit on x86-64; a larger id is not a CPU list of a real host


def parse_cpulist(text: str | None) -> set[int] | None:
    """Parse a kernel CPU list; None when the text is missing or not a CPU list."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        return None
    cpus: set[int] = set()
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            first, last = int(low), int(high if sep else low)
        except ValueError:
            return None
        if not 0 <= first <= last < MAX_CPUS:
            return None
        cpus.update(range(first, last + 1))
    return cpus


def format_cpulist(cpus: Iterable[int]) -> str:
    """Format CPU ids as the kernel does: sorted ranges joined by commas."""
    ordered = sorted(set(cpus))
    ranges: list[str] = []
    start = prev = None
    for cpu in ordered:
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            ranges.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = cpu
    if start is not None:
        ranges.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(ranges)
