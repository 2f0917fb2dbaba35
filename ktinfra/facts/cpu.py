"""The `cpu` section: what the processor is, and how much of it this process may really use."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from fractions import Fraction

from ktinfra.facts.bounds import MAX_THREADS_PER_CORE, within
from ktinfra.facts.cgroup import CgroupLimits
from ktinfra.facts.cpulist import MAX_CPUS, format_cpulist, parse_cpulist
from ktinfra.facts.lscpu import CpuRow, lscpu_fields, lscpu_int, lscpu_node_cpus, parse_cpuinfo, parse_lscpu_p

# contract key -> the kernel's /proc/cpuinfo flag name
ISA_FLAGS = {
    "amx_tile": "amx_tile",
    "amx_int8": "amx_int8",
    "amx_bf16": "amx_bf16",
    "amx_fp16": "amx_fp16",
    "avx512f": "avx512f",
    "avx512bw": "avx512bw",
    "avx512_vnni": "avx512_vnni",
    "avx512_bf16": "avx512_bf16",
    "avx512_vbmi": "avx512vbmi",
    "avx512_fp16": "avx512_fp16",
    "avx_vnni": "avx_vnni",
    "avx2": "avx2",
    "fma": "fma",
}


def _counted_cpus(files: dict[str, str], fields: dict[str, str]) -> set[int]:
    """CPU ids when no listing names them: lscpu's count, else the allowed list nproc counted."""
    count = lscpu_int(fields, "CPU(s)")
    if count is None or not 0 < count <= MAX_CPUS:
        allowed = parse_cpulist(_status_field(files, "Cpus_allowed_list"))
        count = _int(files.get("nproc.txt"))
        if allowed and (count is None or count == len(allowed)):
            return allowed  # nproc counts the CPUs this process may run on
    return set(range(count)) if count and 0 < count <= MAX_CPUS else set()


def cpu_facts(files: dict[str, str], limits: CgroupLimits) -> dict:
    fields = lscpu_fields(files.get("lscpu.json"), files.get("lscpu.txt"))
    blocks, cpuinfo_rows = parse_cpuinfo(files.get("cpuinfo.txt"))
    first = blocks[0] if blocks else {}
    rows, online, note = _topology(files, fields, cpuinfo_rows)

    if not online:
        online = _counted_cpus(files, fields)
    usable = set(online)
    for restriction in (limits.cpuset, parse_cpulist(_status_field(files, "Cpus_allowed_list"))):
        if restriction:
            usable &= restriction
    threads_per_core = within(
        lscpu_int(fields, "Thread(s) per core") or _threads_per_core(rows, first), 1, MAX_THREADS_PER_CORE
    )
    counts = _usable_counts(rows, usable, limits.quota_cpus, threads_per_core, note)
    flags = set((fields.get("Flags") or first.get("flags") or "").split())

    return {
        "vendor": fields.get("Vendor ID") or first.get("vendor_id"),
        "model": fields.get("Model name") or first.get("model name"),
        "family": lscpu_int(fields, "CPU family") or _int(first.get("cpu family")),
        "model_id": lscpu_int(fields, "Model") if "Model" in fields else _int(first.get("model")),
        "sockets": counts.pop("sockets") or within(lscpu_int(fields, "Socket(s)"), 1, MAX_CPUS),
        "threads_per_core": threads_per_core,
        "online_cpus": len(online) or None,
        "amx_permission": _amx_permission(files.get("amx-permission.txt")),
        # NUMA nodes this process may allocate memory on (the cpuset's mems); None: not captured
        "memory_nodes_allowed": format_cpulist(mems)
        if (mems := parse_cpulist(_status_field(files, "Mems_allowed_list")))
        else None,
        **counts,
        "quota_cpus": limits.quota_cpus,
        "hypervisor": fields.get("Hypervisor vendor"),
        "isa": {key: flag in flags for key, flag in ISA_FLAGS.items()} if flags else dict.fromkeys(ISA_FLAGS),
    }


def _topology(
    files: dict[str, str], fields: dict[str, str], cpuinfo_rows: list[CpuRow]
) -> tuple[list[CpuRow], set[int], str | None]:
    """(one row per online CPU, the online CPUs, a note when a per-CPU file disagreed with the totals).

    The per-CPU sources (lscpu -p, then /proc/cpuinfo) are checked against lscpu's own totals: its on-line
    CPU list, or its CPU(s) count when no list was captured, or (no lscpu at all) the CPUs of the NUMA nodes
    `numactl --hardware` shows, or the longer of the two listings, since a file cut short only loses CPUs.
    The first source that lists exactly those CPUs, each with a core id, gives the topology. When none does,
    the online CPUs come from the totals and CPUs no source covers get a row without a core id, so that the
    cores are estimated from threads per core instead of being counted from a part of the machine.
    """
    node_lists = lscpu_node_cpus(fields) or _numactl_node_cpus(files.get("numactl-hardware.txt"))
    node_of = {cpu: node for node, cpus in node_lists.items() for cpu in parse_cpulist(cpus) or ()}
    sources = [
        (name, found)
        for name, found in (
            ("lscpu-p.txt", parse_lscpu_p(files.get("lscpu-p.txt"))),
            ("cpuinfo.txt", cpuinfo_rows),
        )
        if found
    ]
    listed, reference = parse_cpulist(fields.get("On-line CPU(s) list")), "lscpu's on-line list"
    count = len(listed) if listed else lscpu_int(fields, "CPU(s)")
    if not listed:
        reference = "lscpu's CPU(s) count"
    if not listed and count is None and node_of:
        listed, reference = set(node_of), "the NUMA node lists"
        count = len(listed)
    if not listed and count is None and len(sources) > 1:
        reference, longest = max(sources, key=lambda source: len({row.cpu for row in source[1]}))
        listed = {row.cpu for row in longest}
        count = len(listed)

    def agrees(found: list[CpuRow]) -> bool:
        cpus = {row.cpu for row in found}
        if len(cpus) != len(found) or not all(row.core is not None for row in found):
            return False
        return cpus == listed if listed else count is None or len(cpus) == count

    def disagreement(name: str, found: list[CpuRow]) -> str:
        cpus = {row.cpu for row in found}
        extra = cpus - listed if listed else set()
        if extra:
            return f"{name} lists CPUs {format_cpulist(extra)} missing from {reference}"
        if count is not None and len(cpus) != count:
            return f"{name} lists {len(cpus)} CPUs, {reference} {count}"
        if len(cpus) != len(found):
            return f"{name} lists a CPU twice"
        return f"{name} lacks core ids"

    note = None
    chosen = next(((name, found) for name, found in sources if agrees(found)), None)
    if chosen is None and sources:
        name, found = max(sources, key=lambda source: len({row.cpu for row in source[1]} & (listed or set())))
        note = disagreement(name, found)
        chosen = (name, [row for row in found if row.cpu in listed] if listed else found)
    elif chosen is not None and chosen[0] != sources[0][0]:
        note = f"from {chosen[0]}: {disagreement(*sources[0])}"
    rows = chosen[1] if chosen else []

    online = set(listed) if listed else {row.cpu for row in rows}
    if not online:
        online = set(node_of)
    by_cpu = {row.cpu: row for row in rows}
    rows = [by_cpu.get(cpu, CpuRow(cpu, None, None, None)) for cpu in sorted(online)]
    rows = [
        row if row.node is not None else CpuRow(row.cpu, row.core, row.socket, node_of.get(row.cpu))
        for row in rows
    ]
    return rows, online, note


def _usable_counts(
    rows: list[CpuRow], usable: set[int], quota: float | None, threads_per_core: int | None, note: str | None
) -> dict:
    tpc = threads_per_core or 1
    by_cpu = {row.cpu: row for row in rows}
    known = [by_cpu[cpu] for cpu in sorted(usable) if cpu in by_cpu]
    node_cpus: dict[int, set[int]] = defaultdict(set)
    for row in known:
        node_cpus[row.node if row.node is not None else 0].add(row.cpu)
    if not node_cpus and usable:
        node_cpus[0] = set(usable)
    exact = bool(known) and len(known) == len(usable) and all(row.core is not None for row in known)
    if exact:
        node_cores = {
            node: {(by_cpu[cpu].socket, by_cpu[cpu].core) for cpu in cpus} for node, cpus in node_cpus.items()
        }
        cores = set().union(*node_cores.values())
        basis = f"CPUs {format_cpulist(usable)} hold {len(cores)} physical cores"
        per_node_cores = {node: len(c) for node, c in node_cores.items()}
    else:
        per_node_cores = {node: max(1, len(cpus) // tpc) for node, cpus in node_cpus.items()}
        missing = "no per-CPU core ids captured" if note is None else f"core ids incomplete: {note}"
        basis = f"{len(usable)} CPUs / {_per_core(tpc)} ({missing})" if usable else None
        note = None
    if note:
        basis = f"{basis} ({note})"
    physical = sum(per_node_cores.values()) or None
    logical = len(usable) or None
    numa_nodes = len(node_cpus) or None
    per_node = min(per_node_cores.values(), default=None)

    if quota is not None and logical and quota < logical:
        # A CFS quota caps CPU time, not placement: count it as that many hyperthreads of the usable CPUs
        # (seed 002: 16 vCPU on a 2-threads-per-core host = 8 physical cores), spread over the NUMA nodes the
        # cpuset spans. Threads per core are those the usable CPUs hold (a cpuset without sibling pairs: 1).
        threads = Fraction(logical, physical) if exact and physical else Fraction(tpc)
        physical = max(1, min(physical or logical, math.floor(Fraction(quota) / threads)))
        logical = max(1, math.floor(quota))
        per_node = max(1, physical // (numa_nodes or 1))
        basis = (
            f"CPU quota {quota:g} CPUs / {_per_core(threads)} in the usable CPUs = "
            f"{physical} physical cores ({basis})"
        )

    sockets = {row.socket for row in known if row.socket is not None}
    return {
        "sockets": len(sockets) or None,
        "numa_nodes": numa_nodes,
        "logical_cpus": logical,
        "physical_cores": physical,
        "cores_per_numa_node": per_node,
        "physical_cores_basis": basis,
        "usable_cpus": format_cpulist(usable) if usable else None,
        "numa_node_cpus": {str(node): format_cpulist(cpus) for node, cpus in sorted(node_cpus.items())},
        "numa_node_physical_cores": {str(node): count for node, count in sorted(per_node_cores.items())},
    }


def _amx_permission(text: str | None) -> str | None:
    """ "granted", "refused: <why>" (the capture's arch_prctl answer), or None where it was not asked."""
    line = (text or "").strip().splitlines()[0][:200] if (text or "").strip() else ""
    return line if line == "granted" or line.startswith("refused") else None


def _per_core(value: Fraction | int) -> str:
    value = Fraction(value)
    if value == 1:
        return "1 thread per core"
    return f"{value.numerator if value.denominator == 1 else f'{float(value):.3g}'} threads per core"


def _threads_per_core(rows: list[CpuRow], first_cpuinfo: dict[str, str]) -> int | None:
    per_core: dict[tuple, int] = defaultdict(int)
    for row in rows:
        if row.core is not None:
            per_core[(row.socket, row.core)] += 1
    if per_core:
        return max(per_core.values())
    siblings, cores = _int(first_cpuinfo.get("siblings")), _int(first_cpuinfo.get("cpu cores"))
    return siblings // cores if siblings and cores else None


def _numactl_node_cpus(text: str | None) -> dict[int, str]:
    nodes = {}
    for match in re.finditer(r"^node (\d+) cpus:(.*)$", text or "", re.MULTILINE):
        nodes[int(match.group(1))] = match.group(2).strip()
    return nodes


def _status_field(files: dict[str, str], name: str) -> str | None:
    for line in (files.get("proc-self-status.txt") or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip()
    return None


def _int(value: str | None) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None
