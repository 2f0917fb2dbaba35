"""Reading a facts document (docs/CONTRACTS.md, schema 1) for planning: validation and derived numbers."""

from __future__ import annotations

import os
import re

from ktinfra.facts import bounds
from ktinfra.facts.cpulist import parse_cpulist as _cpu_ids
from ktinfra.facts.gpus import COMPUTE_CAPABILITY_RE, MIG_UUID
from ktinfra.shown import json_shown

GB = 1e9
MIB = 1 << 20
MIN_COMPUTE_CAPABILITY = (8, 0)  # bf16 tensor cores; the SGLang-KT and flash-attn wheels target sm80+
AMX_FLAGS = ("amx_tile", "amx_int8", "amx_bf16")

FACTS_SCHEMA = 1
CPULIST_RE = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")
ISA_UNKNOWN = "CPU flags unknown (the capture has no cpuinfo/lscpu)"


class FactsError(ValueError):
    pass


class MissingFact(FactsError):
    pass


def _int_between(low: int, high: int) -> tuple[str, object]:
    top = str(high) if high < 10**6 else f"2^{high.bit_length() - 1}"
    want = {0: "a non-negative integer", 1: "a positive integer"}[low] + f" up to {top}"
    return want, lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _is_str(value) -> bool:
    return isinstance(value, str)


def _is_cpulist(value) -> bool:
    """The kernel's format, ids below its 8192-CPU limit, ranges low-high."""
    if not isinstance(value, str) or CPULIST_RE.fullmatch(value.replace(" ", "")) is None:
        return False
    return _cpu_ids(value) is not None


def _is_compute_capability(value) -> bool:
    return isinstance(value, str) and COMPUTE_CAPABILITY_RE.fullmatch(value.strip()) is not None


CPU_COUNT = _int_between(1, bounds.MAX_CPUS)
CORES_ON_NODE = _int_between(0, bounds.MAX_CPUS)
NUMA_NODES = _int_between(1, bounds.MAX_NUMA_NODES)
THREADS_PER_CORE = _int_between(1, bounds.MAX_THREADS_PER_CORE)
GPU_MEMORY_MIB = _int_between(1, bounds.MAX_GPU_MEMORY_MIB)
MIG_GPU_MEMORY_MIB = _int_between(0, bounds.MAX_GPU_MEMORY_MIB)  # 0: MIG on, no instance
GPU_MULTIPROCESSORS = _int_between(1, bounds.MAX_GPU_MULTIPROCESSORS)
GPU_INDEX = _int_between(0, bounds.MAX_GPU_INDEX)
MEMORY_BYTES = _int_between(1, bounds.MAX_MEMORY_BYTES)
NODE_MEMORY_BYTES = _int_between(0, bounds.MAX_MEMORY_BYTES)  # 0: a CPU-only node
DISK_BYTES = _int_between(0, bounds.MAX_DISK_BYTES)
BOOLEAN = ("true, false or null", lambda v: isinstance(v, bool))
STRING = ("a string", _is_str)
CPULIST = ('a CPU list such as "0-15,32" (ids below 8192)', _is_cpulist)
MIG_DEVICE_UUID = (
    "a MIG device UUID as `nvidia-smi -L` prints it (MIG-<uuid>, or MIG-GPU-<uuid>/<gi>/<ci> before R470)",
    lambda v: isinstance(v, str) and MIG_UUID.fullmatch(v) is not None,
)
OBJECT = ("an object", lambda v: isinstance(v, dict))
LIST = ("a list", lambda v: isinstance(v, list))


def _bad(path: str, want: str, value) -> FactsError:
    return FactsError(f"facts: {path} must be {want}, got {json_shown(value)}")


def _field(node: dict, key: str, path: str, kind: tuple, *, required: bool = False):
    """node[key] checked against kind; null (or absent) only where the facts may not know the value."""
    want, ok = kind
    value = node.get(key)
    if value is None:
        if required:
            raise MissingFact(f"facts lack {path} ({want})")
        return None
    if not ok(value):
        raise _bad(path, want, value)
    return value


def _check_cpu(facts: dict) -> None:
    cpu = _field(facts, "cpu", "cpu", OBJECT, required=True)
    cores = _field(cpu, "physical_cores", "cpu.physical_cores", CPU_COUNT, required=True)
    logical = _field(cpu, "logical_cpus", "cpu.logical_cpus", CPU_COUNT, required=True)
    if logical < cores:
        raise _bad("cpu.logical_cpus", f"at least cpu.physical_cores ({cores})", logical)
    _field(cpu, "numa_nodes", "cpu.numa_nodes", NUMA_NODES)
    _field(cpu, "threads_per_core", "cpu.threads_per_core", THREADS_PER_CORE)
    _field(cpu, "model", "cpu.model", STRING)
    _field(cpu, "usable_cpus", "cpu.usable_cpus", CPULIST)
    _field(cpu, "online_cpus", "cpu.online_cpus", CPU_COUNT)
    node_cpus = _field(cpu, "numa_node_cpus", "cpu.numa_node_cpus", OBJECT) or {}
    for node in node_cpus:
        _field(node_cpus, node, f"cpu.numa_node_cpus.{node}", CPULIST, required=True)
    node_cores = _field(cpu, "numa_node_physical_cores", "cpu.numa_node_physical_cores", OBJECT) or {}
    for node in node_cores:
        _field(node_cores, node, f"cpu.numa_node_physical_cores.{node}", CORES_ON_NODE, required=True)
    isa = _field(cpu, "isa", "cpu.isa", OBJECT, required=True)
    for flag in isa:
        _field(isa, flag, f"cpu.isa.{flag}", BOOLEAN)


def _check_gpus(facts: dict) -> None:
    seen: set[int] = set()
    for i, gpu in enumerate(_field(facts, "gpus", "gpus", LIST, required=True)):
        if not isinstance(gpu, dict):
            raise _bad(f"gpus[{i}]", "an object", gpu)
        mig = _field(gpu, "mig", f"gpus[{i}].mig", BOOLEAN)
        if mig:  # one instance's memory: 0 without instances, null when they are unknown
            _field(gpu, "memory_mib", f"gpus[{i}].memory_mib", MIG_GPU_MEMORY_MIB)
        else:
            _field(gpu, "memory_mib", f"gpus[{i}].memory_mib", GPU_MEMORY_MIB, required=True)
        _check_mig_devices(gpu, f"gpus[{i}].mig_devices")
        # `ktinfra facts` drops GPUs without a name or index; problem texts name the GPU by both
        index = _field(gpu, "index", f"gpus[{i}].index", GPU_INDEX, required=True)
        if index in seen:  # CUDA_VISIBLE_DEVICES would name one GPU twice
            raise FactsError(f"gpus[{i}].index {index} is the index of an earlier GPU too")
        seen.add(index)
        _field(gpu, "name", f"gpus[{i}].name", STRING, required=True)
        cc = ('a compute capability such as "9.0"', _is_compute_capability)
        _field(gpu, "compute_capability", f"gpus[{i}].compute_capability", cc)


def _check_mig_devices(gpu: dict, path: str) -> None:
    for j, device in enumerate(_field(gpu, "mig_devices", path, LIST) or []):
        if not isinstance(device, dict):
            raise _bad(f"{path}[{j}]", "an object", device)
        _field(device, "index", f"{path}[{j}].index", GPU_INDEX, required=True)
        _field(device, "memory_mib", f"{path}[{j}].memory_mib", GPU_MEMORY_MIB)
        for key in ("gpu_instance_id", "compute_instance_id"):
            _field(device, key, f"{path}[{j}].{key}", GPU_INDEX)
        _field(device, "multiprocessor_count", f"{path}[{j}].multiprocessor_count", GPU_MULTIPROCESSORS)
        _field(device, "profile", f"{path}[{j}].profile", STRING)
        _field(device, "uuid", f"{path}[{j}].uuid", MIG_DEVICE_UUID)  # plans carry it to CUDA_VISIBLE_DEVICES


def _check_system(facts: dict) -> None:
    memory = _field(facts, "memory", "memory", OBJECT, required=True)
    _field(memory, "total_bytes", "memory.total_bytes", MEMORY_BYTES, required=True)
    for key in ("numa_node_bytes", "numa_node_total_bytes"):
        node_memory = _field(memory, key, f"memory.{key}", OBJECT) or {}
        for node in node_memory:
            if not str(node).isdigit():
                raise _bad(f"memory.{key}", 'an object of node numbers ("0", "1", ...)', node)
            _field(node_memory, node, f"memory.{key}.{node}", NODE_MEMORY_BYTES, required=True)
    _field(facts, "container", "container", BOOLEAN)
    os_facts = _field(facts, "os", "os", OBJECT) or {}
    for key in ("kernel", "glibc"):
        _field(os_facts, key, f"os.{key}", STRING)
    for i, disk in enumerate(_field(facts, "disks", "disks", LIST) or []):
        if not isinstance(disk, dict):
            raise _bad(f"disks[{i}]", "an object", disk)
        _field(disk, "mount", f"disks[{i}].mount", STRING, required=True)
        _field(disk, "avail_bytes", f"disks[{i}].avail_bytes", DISK_BYTES)
        _field(disk, "fstype", f"disks[{i}].fstype", STRING)


def validate(facts: object) -> dict:
    """The facts document when every key the planner reads has its contract type, else FactsError."""
    if not isinstance(facts, dict):
        raise FactsError("facts must be a JSON object (the output of `ktinfra facts --json`)")
    if facts.get("schema") != FACTS_SCHEMA:
        raise FactsError(
            f"not facts schema {FACTS_SCHEMA} (`ktinfra facts --json` output): "
            f"schema is {json_shown(facts.get('schema'))}"
        )
    try:
        _check_cpu(facts)
        _check_gpus(facts)
        _check_system(facts)
    except MissingFact as missing:
        raise MissingFact(f"{missing}; {_where_facts_come_from(facts.get('source'))}") from None
    return facts


def _where_facts_come_from(source: object) -> str:
    if source == "live":
        return "this host did not report it (see `ktinfra facts`)"
    if isinstance(source, str) and source and os.path.isdir(source):
        return f"the capture {source} does not give it (a file missing or damaged)"
    return "produce them with `ktinfra facts --json`"


def gb(value: float) -> str:
    """Bytes as people read them in the problem and reason strings (decimal GB)."""
    return f"{value / GB:.1f} GB" if value < 100 * GB else f"{value / GB:.0f} GB"


def gb_apart(need: float, have: float) -> tuple[str, str]:
    """need and have as gb() writes them, with more decimals while they would read the same."""
    for digits in (None, 2, 3):
        shown = [gb(v) if digits is None else f"{v / GB:.{digits}f} GB" for v in (need, have)]
        if shown[0] != shown[1]:
            break
    return shown[0], shown[1]


def parse_cpulist(text: str | None) -> set[int]:
    """CPU ids of a list validate() accepted (empty for none)."""
    return _cpu_ids(text) or set()


def isa_flag(facts: dict, flag: str) -> bool | None:
    """What the facts say about one CPU flag; None when they do not know (no cpuinfo/lscpu captured)."""
    value = facts["cpu"]["isa"].get(flag)
    return value if isinstance(value, bool) else None


def has_amx(facts: dict) -> bool:
    return all(isa_flag(facts, flag) is True for flag in AMX_FLAGS)


def amx_unknown(facts: dict) -> bool:
    """The facts cannot tell whether the CPU has AMX: no AMX flag is known to be absent."""
    return not has_amx(facts) and all(isa_flag(facts, flag) is not False for flag in AMX_FLAGS)


# Logical CPUs kept free of kt-kernel workers: the thread that submits MoE work to CPUInfer and the
# scheduler/tokenizer need CPUs of their own. Measured on the H100 host (docs/results/2026-11-21-h100-amx):
# 16 workers on 16 vCPUs decode at 7% of the best, 14 at 83-99%, and 15 collapses beside one busy process.
RESERVED_LOGICAL_CPUS = 2


def cpu_worker_threads(facts: dict, ranks: int = 1) -> tuple[int, str]:
    """kt-kernel worker threads: one per usable physical core, minus the CPUs the rest of the process needs
    when no hyperthread siblings are left over to take that work. `ranks`: the tensor-parallel ranks, each
    a scheduler process of its own that waits out every decode step spinning on its GPU (CUDA's default
    spin-wait), while kt-kernel runs the CPU experts for rank 0: one more busy CPU per rank beyond the first
    (measured: workers + busy neighbours on every CPU collapse, 14 workers beside 2 busy ones on 16)."""
    cpu = facts["cpu"]
    cores, logical = cpu["physical_cores"], cpu["logical_cpus"]
    needed = RESERVED_LOGICAL_CPUS + max(0, ranks - 1)
    reserve = max(0, needed - (logical - cores))
    threads = max(1, cores - reserve)
    schedulers = "scheduler" if ranks <= 1 else f"{ranks} tensor-parallel ranks' scheduler"
    if reserve == 0:
        spare = logical - cores
        note = f"{spare} hyperthread sibling(s) are left for the submitting and {schedulers} threads"
    elif threads == cores:
        note = f"one worker on the only core, which it shares with the submitting and {schedulers} threads"
    else:
        schedulers = "the scheduler" if ranks <= 1 else f"the schedulers of the {ranks} tensor-parallel ranks"
        note = (
            f"{cores - threads} core(s) kept free for the thread that submits MoE work and {schedulers} "
            "(measured: workers on every vCPU decode at 7% of the best)"
        )
    return threads, note


AMX_PERMISSION_KERNEL = (5, 16)  # ARCH_REQ_XCOMP_PERM for XTILEDATA


def amx_blocked_by_kernel(facts: dict) -> str | None:
    """Why the kernel does not grant AMX tiles to a process ("<release>", or "<release> (refused: ...)"),
    else None. The capture's own arch_prctl answer (cpu.amx_permission) wins over the release: distribution
    kernels before 5.16 carry the backport, and a new kernel can still refuse (a seccomp filter, say)."""
    release = (facts.get("os") or {}).get("kernel")
    permission = (facts.get("cpu") or {}).get("amx_permission")
    if permission == "granted":
        return None
    if isinstance(permission, str) and permission.startswith("refused"):
        return f"{release or 'unknown'} ({permission})"
    version = _version(release)
    return release if version and version < AMX_PERMISSION_KERNEL else None


def numa_node_cores(facts: dict) -> dict[int, int]:
    """Usable physical cores per NUMA node, for the nodes that hold any and whose memory this process may
    use: kt-kernel binds each thread pool's threads and its expert weights to one node, and a node outside
    the cpuset's mems cannot hold them (when no node is left, the CPUs' nodes are taken as they are)."""
    cores = _cpu_node_cores(facts)
    allowed = memory_nodes_allowed(facts)
    kept = {node: n for node, n in cores.items() if allowed is None or node in allowed}
    return kept or cores  # no CPU node has allowed memory (memory-only nodes?): the CPUs' nodes, as before


def memory_nodes_allowed(facts: dict) -> set[int] | None:
    text = facts["cpu"].get("memory_nodes_allowed")
    return parse_cpulist(text) or None if isinstance(text, str) else None


def _cpu_node_cores(facts: dict) -> dict[int, int]:
    cpu = facts["cpu"]
    counted = cpu.get("numa_node_physical_cores")
    if isinstance(counted, dict) and counted:
        return {int(node): int(n) for node, n in counted.items() if str(node).isdigit() and n}
    usable = parse_cpulist(cpu.get("usable_cpus"))
    per_core = max(1, int(cpu.get("threads_per_core") or 1))
    cores = {}
    for node, text in (cpu.get("numa_node_cpus") or {}).items():
        cpus = parse_cpulist(text)
        cpus = cpus & usable if usable else cpus
        if cpus and str(node).isdigit():
            cores[int(node)] = max(1, len(cpus) // per_core)
    return cores


def numa_nodes_in_use(facts: dict) -> int:
    """NUMA nodes that hold CPUs this process may run on."""
    return len(numa_node_cores(facts)) or max(1, int(facts["cpu"].get("numa_nodes") or 1))


def numa_nodes_of_usable_cpus(facts: dict) -> int:
    """NUMA nodes that hold CPUs this process may run on, whether or not it may allocate their memory."""
    return len(_cpu_node_cores(facts)) or numa_nodes_in_use(facts)


def _nodes(ids) -> str:
    return ", ".join(str(i) for i in sorted(ids))


def numa_node_memory(facts: dict, key: str = "numa_node_bytes") -> dict[int, int] | None:
    """Memory per NUMA node (memory.numa_node_bytes: what a process may allocate; numa_node_total_bytes:
    MemTotal, huge pages included), None when the facts do not know it."""
    nodes = facts["memory"].get(key)
    if not isinstance(nodes, dict) or not nodes:
        return None
    return {int(node): int(size) for node, size in nodes.items() if str(node).isdigit()}


def _short_nodes(memory: dict[int, int] | None, nodes: list[int], share_bytes: float | None) -> list[int]:
    """Those of `nodes` whose memory cannot hold their pool's even share of `share_bytes` (none when the
    node memory is unknown)."""
    if memory is None or not share_bytes or not nodes:
        return []
    return [node for node in nodes if memory.get(node, 0) < share_bytes / len(nodes)]


def hwloc_nodes(facts: dict) -> list[int] | None:
    """The kernel's node numbers of hwloc's NUMA nodes, in hwloc's logical order, or None where the facts do
    not tell. hwloc 2's Linux backend makes a NUMA node of every online node (its nodeset and cpumap, not its
    memory: topology-linux.c look_sysfsnode), and kt-kernel loads the topology with no flags, so hwloc then
    drops the nodes outside the cgroup cpuset's mems (HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED unset): in a
    container whose cpuset.mems is 1, kernel node 1 is hwloc's node 0. The kernel never lets a memoryless node
    into the mems (they are within N_MEMORY), so Mems_allowed_list is the list, a node whose memory is all
    huge pages included (0 bytes in numa_node_bytes); without it (older captures), the nodes with memory
    are taken: MemTotal above 0 (numa_node_total_bytes, which keeps that node), else bytes above 0."""
    memory = numa_node_memory(facts)
    allowed = memory_nodes_allowed(facts)
    if allowed is not None:
        return sorted(allowed & set(memory) if memory else allowed)
    with_memory = numa_node_memory(facts, "numa_node_total_bytes") or memory
    if with_memory is None:
        return None
    return sorted(n for n, size in with_memory.items() if size > 0)


def hwloc_indices(facts: dict, nodes: list[int]) -> list[int]:
    """`nodes` (the kernel's node numbers) as kt-kernel's --kt-numa-nodes takes them: kt-kernel 0.7.2 looks a
    pool's node up with hwloc_get_obj_by_type(HWLOC_OBJ_NUMANODE, id), a logical index that counts hwloc's
    NUMA nodes (hwloc_nodes): on a host with nodes 0 and 2, node 2 is index 1, and 2 finds no node (the
    pool's threads and memory stay unbound). Where the facts do not tell, the node numbers are kept.

    A node hwloc does not show (memoryless, or outside the cpuset's mems) has no index: it gets one past
    hwloc's last, each its own, so that no two pools share an index and none names another node (its kernel
    number could be another node's index: nodes 0 and 1 with node 0 memoryless were both 0)."""
    order = hwloc_nodes(facts)
    if order is None:
        return nodes
    ranks = {node: rank for rank, node in enumerate(order)}
    unseen = iter(range(len(order), len(order) + len(nodes)))
    return [ranks[node] if node in ranks else next(unseen) for node in nodes]


_VECTOR_PAST_END = (
    "kt-kernel 0.7.2 (cpu_backend/worker_pool.cpp, WorkerPool::init and NumaJobDistributor::init) counts "
    "each node's threads in a vector sized by the pool count and indexed by the node id"
)


def past_pools_warning_head(ids: list[int]) -> str:
    """How the planner's warning for these ids (with the kernel's nodes) begins: render finds it by this."""
    return f"kt_numa_nodes {' '.join(map(str, ids))} (kernel node(s) "


def numa_ids_past_pools(ids: list[int] | None, nodes: list[int] | None = None) -> str | None:
    """Why --kt-numa-nodes `ids` (hwloc indices of the kernel's `nodes`, one per pool) trip kt-kernel, or
    None. kt-kernel 0.7.2 cpu_backend/worker_pool.cpp (WorkerPool::init, NumaJobDistributor::init) keeps
    the threads placed so far per node in numa_threads_count, a vector sized by the pool count and indexed by
    the node id: an id at or past the pool count reads and writes past its end. A warning, not a problem: a
    small id stays within the block glibc's malloc hands out for the vector (24 usable bytes, 6 ints, for up
    to 6 pools), so the harm expected is to pinning, not a crash (not run); a cpuset whose mems hold only
    the pools' nodes makes hwloc number them 0..n-1, and the plan then names none. `nodes` None (render, from
    a plan file, which holds no kernel node of these ids): the same defect, the remedy pointed to."""
    pools = len(ids or ())
    past = [i for i in ids or () if i >= pools]
    if not past:
        return None
    listed = " ".join(map(str, ids))
    if nodes is None:
        return (
            f"kt_numa_nodes {listed} for {pools} pool(s): id(s) {_nodes(set(past))} at or past the pool "
            f"count: {_VECTOR_PAST_END}, so those ids read and write past its end (undefined behaviour: "
            "kt-kernel can print 'Core N inside NUMA node M not found' and leave that pool's "
            "threads unpinned). Not refused (not run here); the plan does not name the kernel's nodes of "
            "these hwloc indices: `ktinfra plan` on the host words the remedy (a cpuset whose mems hold only "
            "the pools' nodes, and kt_numa_nodes null: the kt_serve role's kt_serve_overrides "
            "{kt_numa_nodes: null})"
        )
    kernel = ",".join(map(str, sorted(nodes)))
    return (
        f"{past_pools_warning_head(ids)}{_nodes(nodes)}) for {pools} pool(s): "
        f"{_VECTOR_PAST_END}, so id(s) {_nodes(past)} read and write past its end (undefined behaviour: a "
        "pool's first core can come out as garbage, kt-kernel then prints 'Core N inside NUMA node M not "
        "found' and leaves that pool's threads unpinned; an id far past the count can overwrite other heap "
        "memory); and the thread that builds pool i binds its memory to hwloc node i, not to the pool's "
        "named node (NumaJobDistributor::worker_thread). The plan keeps the layout (not refused: a small id "
        "stays within the vector's heap block, so kt-kernel is expected to start; not run here); to avoid "
        f"both, serve in a cpuset whose mems hold node(s) {_nodes(nodes)} only, so that hwloc "
        f"numbers them from 0 and no --kt-numa-nodes is needed: docker run --cpuset-mems {kernel} with the "
        f"plan made inside that container, or AllowedMemoryNodes={kernel} in kt_serve_unit_dropin with "
        "kt_serve_overrides {kt_numa_nodes: null} (the kt_serve role then passes no --kt-numa-nodes)"
    )


# kt-kernel 0.7.2 (kvcache-ai/ktransformers 95009ea, kt-kernel/cpu_backend/), where a pool's memory is bound
POOL_MEMORY_BINDS = (
    "experts_base.py passes the list as subpool_numa_map; cpu_backend/worker_pool.cpp:287 starts pool i's "
    "NumaJobDistributor thread with i, and :385-387 worker_thread binds "
    "its memory to hwloc node i (set_memory_to_numa, worker_pool.h:35-49), whatever id the list names; the "
    "pool's other workers bind to hwloc node <id> (worker_pool.cpp:57, :212-214), and the thread building "
    "the pool binds with libnuma to the kernel's node <id> (set_to_numa, worker_pool.h:28-33, called at "
    "worker_pool.cpp:430)"
)


def numa_ids_out_of_order(ids: list[int] | None, order: list[int] | None = None) -> str | None:
    """Why a --kt-numa-nodes list `ids` (hwloc indices, one per pool) puts part of a pool's weights on another
    node than the pool's, or None: any list other than 0..n-1 whose ids are all below the pool count (those
    at or past it: numa_ids_past_pools), such as 1 0, or 0 0. kt-kernel 0.7.2 binds the memory of pool i's
    distributor thread, which allocates the pool's slice of every expert and fills a share of it as the
    pool's worker 0, to hwloc node i, and the other workers' to hwloc node ids[i]; pages go where the
    thread that first writes them is bound, so the per-node memory check of the pool's node (ids[i]) does
    not cover node i. `order`: hwloc_nodes (the kernel's numbers of hwloc's nodes), to name them; None:
    the indices are named as they are."""
    pools = len(ids or ())
    if not ids or ids == list(range(pools)) or max(ids) >= pools:
        return None

    def kernel(index: int) -> str:
        number = order[index] if order and index < len(order) else None
        return f"hwloc node {index}" + (f" (kernel node {number})" if number is not None else "")

    moved = "; ".join(
        f"pool {i} runs on {kernel(node)}, its distributor binds to {kernel(i)}"
        for i, node in enumerate(ids)
        if node != i
    )
    remedy = (
        "leave kt_numa_nodes null: kt-kernel's default 0..n-1 names the same nodes, and the pools split "
        "every expert evenly, so their order gains nothing"
        if sorted(ids) == list(range(pools))
        else "name each pool's node once, in ascending order (or null for 0..n-1)"
    )
    return (
        f"kt_numa_nodes {' '.join(map(str, ids))} is not hwloc's order 0..{pools - 1}: {moved}. In kt-kernel "
        f"0.7.2 {POOL_MEMORY_BINDS}: so part of each such pool's weights, the share its distributor thread "
        "writes first, lands on the distributor's node, away from the pool's threads, and the plan's "
        "per-node memory check looked at the pool's node only (not refused: kt-kernel is expected to start "
        f"and serve, with remote memory reads; not run here); {remedy}"
    )


def sequential_pool_nodes(facts: dict, pools: int) -> list[int]:
    """The kernel's nodes of pools 0..pools-1 where kt-kernel binds pool i to hwloc's NUMA node i (no node
    list: fine-tuning, the legacy stack's serving)."""
    order = hwloc_nodes(facts)
    return order[:pools] if order and len(order) >= pools else list(range(pools))


def _best_placement(
    order: list[int],
    cores: dict[int, int],
    threads: int,
    width: int | None = None,
    holds=None,
    named: bool = False,
    max_pools: int | None = None,
) -> tuple[list[int], int]:
    """(nodes, threads they can run): the pool count whose even split of the threads runs the most, each pool
    capped by the fewest usable cores among its nodes (a node absent from `cores` has none), at most
    `max_pools`. `named`: any nodes of `order` may take the pools (--kt-numa-nodes), the first ones that hold
    a pool; else only the first k of `order` (pool i on node i). `width`: the expert width kt-kernel splits
    evenly over the pools; counts that do not divide it are out. `holds(node, pools)`: whether the node's
    memory holds one pool's share of the experts when there are `pools`; nodes that do not are out."""
    best: tuple[list[int], int] = ([], 0)
    for pools in range(1, min(threads, len(order), max_pools or len(order)) + 1):
        if width and width % pools:
            continue
        able = [node for node in order if holds is None or holds(node, pools)] if named else order
        chosen = able[:pools]
        if len(chosen) < pools or (holds is not None and not all(holds(node, pools) for node in chosen)):
            continue
        fit = min(threads, pools * min(cores.get(node, 0) for node in chosen))
        if fit >= best[1]:  # ties: more pools spread the expert weights over more memory channels
            best = (sorted(chosen), fit)
    return best


def _pools_limited(cores: dict[int, int], nodes: list[int], fit: int, threads: int) -> str | None:
    pools = len(nodes)
    idle_nodes = sorted(set(cores) - set(nodes))
    lost = [f"{threads - fit} of {threads} worker threads unused"] if fit < threads else []
    lost += [f"node(s) {_nodes(idle_nodes)} idle"] if idle_nodes else []
    if not lost:
        return None
    layout = ", ".join(f"{node}: {count}" for node, count in sorted(cores.items()))
    share = f"{fit // pools}" + (f"-{fit // pools + 1}" if fit % pools else "")
    return (
        "kt-kernel gives every thread pool (one per NUMA node) an even share of the threads; "
        f"with usable physical cores per node {layout}, {pools} pool(s) of {share} threads on node(s) "
        f"{_nodes(nodes)} run the most threads, leaving " + " and ".join(lost)
    )


# kt-kernel 0.7.2 operators/moe-tp.hpp:68 (v0.4.4: :55; TP_MOE_Common, every serving backend): "For TP,
# intermediate_size must be a multiple of NUMA node count", thrown when the experts are built.
POOLS_SPLIT_WIDTH = "kt-kernel's operators/moe-tp.hpp refuses a pool count that does not divide it"


def _width_note(order, cores, threads, width, nodes, fit, named=False, max_pools=None) -> str | None:
    """What the even split of the expert width cost: the placement that more pools would have had."""
    if not width:
        return None
    free_nodes, free_fit = _best_placement(order, cores, threads, named=named, max_pools=max_pools)
    if (free_nodes, free_fit) == (nodes, fit):
        return None
    return (
        f"{len(free_nodes)} pools would run {free_fit} threads, but each pool takes an equal slice of the "
        f"{width}-wide experts, and {width} is not a multiple of {len(free_nodes)} ({POOLS_SPLIT_WIDTH})"
    )


def _memory_holds(facts: dict, share_bytes: float | None):
    """The `holds` of _best_placement for a pool share of `share_bytes` in all, or None where it cannot
    tell."""
    memory = numa_node_memory(facts)
    if memory is None or not share_bytes:
        return None
    return lambda node, pools: memory.get(node, 0) >= share_bytes / pools


def _placed(
    facts, order, cores, threads, width, share_bytes, named=False, max_pools=None
) -> tuple[list[int], int, str | None]:
    """(nodes, threads, why fewer pools than the cores allow): the best placement whose pools' shares fit
    their nodes' memory; when none fits, the best by cores (pool_memory_problem then refuses the plan)."""
    nodes, fit = _best_placement(order, cores, threads, width, named=named, max_pools=max_pools)
    holds = _memory_holds(facts, share_bytes)
    if holds is None or all(holds(node, len(nodes)) for node in nodes):
        return nodes, fit, None
    held, held_fit = _best_placement(order, cores, threads, width, holds, named, max_pools)
    if not held_fit:
        return nodes, fit, None
    short = _short_nodes(numa_node_memory(facts), nodes, share_bytes)
    slice_, held_slice = gb(share_bytes / len(nodes)), gb(share_bytes / len(held))
    note = (
        f"{len(nodes)} pools on node(s) {_nodes(nodes)} would run {fit} threads, but kt-kernel splits "
        f"every CPU expert evenly over the pools and keeps each pool's slice ({slice_}) in its own node's "
        f"memory, which node(s) {_nodes(short)} cannot hold; {len(held)} pool(s) on node(s) {_nodes(held)} "
        f"hold theirs ({held_slice} each)"
    )
    return held, held_fit, note


SERVE_POOL_REMEDY = "use a smaller --cpu-format, or a host whose nodes hold the share"


def pool_memory_problem(
    facts: dict, nodes: list[int], share_bytes: float | None, remedy: str = SERVE_POOL_REMEDY
) -> str | None:
    """Why the pools on `nodes` (kernel node numbers) cannot hold their shares of `share_bytes`, or None."""
    memory = numa_node_memory(facts)
    lacking = _short_nodes(memory, nodes, share_bytes)
    if not lacking:
        return None
    share = share_bytes / len(nodes)
    short = ", ".join(f"node {n} has {gb(memory.get(n, 0))}" for n in lacking)
    layout = ", ".join(f"{n}: {gb(size)}" for n, size in sorted(memory.items()))
    return (
        f"each of the {len(nodes)} kt-kernel thread pool(s) on NUMA node(s) {_nodes(nodes)} keeps its slice "
        f"of every CPU expert, {gb(share)} ({gb(share_bytes)} / {len(nodes)}), in its own node's memory, and "
        f"{short} (memory per node {layout}); no fewer pools fit either (kt-kernel keeps every expert in "
        f"RAM, GPU experts included): {remedy}"
    )


def thread_pools(
    facts: dict,
    threads: int,
    max_pools: int | None = None,
    width: int | None = None,
    share_bytes: float | None = None,
) -> tuple[int, int, str | None, list[int]]:
    """(kt_threadpool_count, threads, warning, the pools' nodes) as kt-kernel places them, at most
    `max_pools` pools (a backend that cannot split the experts further); `share_bytes`: the CPU experts,
    which the pools split evenly, each in its node's memory (memory.numa_node_bytes).

    kt-kernel 0.7.2 (experts_base._get_cpu_infer) gives every pool threads // pools threads and binds pool
    i to NUMA node i unless SGLang names the nodes (--kt-numa-nodes, sglang-kt 0.7.2): the pools go on the
    nodes with the most usable cores among those whose memory holds a pool's share, whichever they are
    (hwloc_indices: how --kt-numa-nodes names them)."""
    cores = numa_node_cores(facts)
    if not cores:
        count = min(numa_nodes_in_use(facts), threads, max_pools or threads)
        return count, threads, None, list(range(count))
    # SGLang names the pools' nodes (--kt-numa-nodes): the ones with the most usable cores that can hold a
    # pool; hwloc shows no node outside the cpuset's mems (none memoryless): kt-kernel binds no pool there
    seen = hwloc_nodes(facts)
    order = sorted(cores, key=lambda node: (-cores[node], node))
    order = [node for node in order if seen is None or node in seen] or order
    nodes, fit, memory_note = _placed(facts, order, cores, threads, width, share_bytes, True, max_pools)
    limited = _pools_limited(cores, nodes, fit, threads)
    split = None if memory_note else _width_note(order, cores, threads, width, nodes, fit, True, max_pools)
    notes = [note for note in (limited, split, memory_note) if note]
    return len(nodes), fit, "; ".join(notes) if limited else None, nodes


def sequential_thread_pools(
    facts: dict,
    threads: int,
    max_pools: int | None = None,
    serving: bool = False,
    width: int | None = None,
    share_bytes: float | None = None,
) -> tuple[int, int, str | None]:
    """(kt_threadpool_count, threads, warning) where kt-kernel binds pool i to NUMA node i and takes no node
    list: its fine-tuning path (kt-kernel 0.7.2 kt_kernel/sft/base.py), and with `serving` the legacy stack
    (kt-kernel v0.4.4; its sglang fork has no --kt-numa-nodes). The pools can only be hwloc's nodes 0..n-1
    (sequential_pool_nodes names them), so n is the count of those that runs the most threads (at most
    `max_pools`) and holds its share of `share_bytes` on each node."""
    cores = numa_node_cores(facts)
    if not cores:
        return min(numa_nodes_in_use(facts), threads, max_pools or threads), threads, None
    if serving:
        what, why, remedy = "the legacy stack's serving", "its sglang fork has no --kt-numa-nodes", "serve"
    else:
        what, why, remedy = "fine-tuning", "kt_kernel/sft/base.py names no nodes", "fine-tune"
    # pool i is on hwloc's node i: the nodes this process may allocate on, in order
    order = (hwloc_nodes(facts) or list(range(max(cores) + 1)))[:max_pools]
    nodes, fit, memory_note = _placed(facts, order, cores, threads, width, share_bytes)
    if not fit:
        first = order[0] if order else 0
        warning = (
            f"kt-kernel binds {what} thread pool 0 to NUMA node {first} ({why}, unlike serving's "
            f"--kt-numa-nodes on the current stack), and this process has no usable cores there, or may not "
            f"allocate its memory: its {threads} workers are usable on node(s) {_nodes(cores)} only, so they "
            f"run away from the node kt-kernel binds them and their expert weights to; {remedy} where node "
            f"{first}'s CPUs and memory are this process's"
        )
        return 1, threads, warning
    limited = _pools_limited(cores, nodes, fit, threads)
    sequential = f"; {what} binds pool i to node i ({why})"
    split = None if memory_note else _width_note(order, cores, threads, width, nodes, fit)
    more = "".join(f"; {note}" for note in (split, memory_note) if note)
    return len(nodes), fit, limited and limited + sequential + more


def compute_capability(gpu: dict) -> tuple[int, int] | None:
    text = str(gpu.get("compute_capability") or "")
    major, _, minor = text.partition(".")
    if not major.isdigit():
        return None
    return int(major), int(minor or 0)


def gpu_problems(facts: dict, purpose: str) -> list[str]:
    gpus = facts["gpus"]
    if not gpus:
        return [
            f"no NVIDIA GPU found: {purpose} keeps attention and dense weights on a GPU (compute "
            "capability >= 8.0)"
        ]
    problems = [mig_unusable(gpu) for gpu in gpus if not has_memory(gpu)]
    for gpu in gpus:
        cc = compute_capability(gpu)
        if cc is not None and cc < MIN_COMPUTE_CAPABILITY:
            problems.append(
                f"GPU {gpu.get('index')} ({gpu.get('name')}) has compute capability "
                f"{gpu['compute_capability']}; "
                "KT needs >= 8.0 (Ampere or newer, bf16 tensor cores)"
            )
    return problems


def has_memory(gpu: dict) -> bool:
    """The GPU has memory a process can use: false for a MIG-enabled GPU without (known) instances."""
    return bool(gpu.get("memory_mib"))


def usable_gpus(gpus: list[dict]) -> list[dict]:
    return [gpu for gpu in gpus if has_memory(gpu)]


def mig_unusable(gpu: dict) -> str:
    """The problem of a MIG-enabled GPU that leaves no memory to plan on."""
    name = f"GPU {gpu.get('index')} ({gpu.get('name')})"
    if gpu.get("mig_devices"):  # listed, but without memory (nvidia-smi printed N/A)
        return f"{name} has MIG enabled and none of its MIG instances reports memory: no usable GPU memory"
    if gpu.get("memory_mib") is None:
        return (
            f"{name} has MIG enabled and the facts do not list its MIG instances (they come from "
            "`nvidia-smi -q -x`, which the capture lacks): no usable GPU memory is known; a process gets "
            "one instance, never the whole card"
        )
    return (
        f"{name} has MIG enabled without MIG instances: no usable GPU memory; create one "
        f"(`nvidia-smi mig -i {gpu.get('index')} -cgi <profile> -C`) or turn MIG off "
        f"(`nvidia-smi -i {gpu.get('index')} -mig 0`)"
    )


def mig_instance(gpu: dict) -> dict | None:
    """The MIG instance a plan on this MIG-enabled GPU is sized for: the largest."""
    devices = [d for d in gpu.get("mig_devices") or [] if d.get("memory_mib") == gpu.get("memory_mib")]
    return devices[0] if gpu.get("mig") and devices else None


def mig_uuids(gpus: list[dict]) -> list[str] | None:
    """The MIG device UUIDs CUDA_VISIBLE_DEVICES names for `gpus` (one each, in their order): the planned
    instance of each; None when no GPU is MIG-enabled or when an instance's UUID is not in the facts."""
    if not any(gpu.get("mig") for gpu in gpus):
        return None
    uuids = [(mig_instance(gpu) or {}).get("uuid") for gpu in gpus]
    return uuids if all(uuids) else None


def _instance_shown(gpu: dict, device: dict | None) -> str:
    if device is None:
        return f"its largest instance, {gpu['memory_mib']} MiB"
    sms = device.get("multiprocessor_count")
    profile = f"{device['profile']}, " if device.get("profile") else ""
    return (
        f"its largest instance, MIG device {device['index']} ({profile}GPU instance "
        f"{device.get('gpu_instance_id')}, {'?' if sms is None else sms} SMs), {gpu['memory_mib']} MiB"
    )


def mig_reason(gpus: list[dict]) -> str:
    """Why a plan's mig_uuids names these instances (only for a plan that has them)."""
    named = "; ".join(
        f"GPU {gpu.get('index')}: {mig_instance(gpu)['uuid']}, {_instance_shown(gpu, mig_instance(gpu))}"
        for gpu in gpus
    )
    return (
        f"{named}: the instance the plan is sized for; on a MIG-enabled GPU CUDA_VISIBLE_DEVICES selects an "
        "instance by its MIG UUID (`nvidia-smi -L`), and the GPU index does not choose which one the process "
        "gets"
    )


def mig_warnings(gpus: list[dict], ranks: str, key: str) -> list[str]:
    """What a plan on MIG-enabled GPUs must tell: one instance, not the card, and how it is selected; `key`
    is the plan's mig_uuids key ("serve.mig_uuids")."""
    warnings = []
    named = mig_uuids(gpus)
    for gpu in gpus:
        if not gpu.get("mig"):
            continue
        device = mig_instance(gpu)
        count = len(gpu.get("mig_devices") or [])
        index = gpu.get("index")
        text = (
            f"GPU {index} ({gpu.get('name')}) is MIG-partitioned into {count} instance(s): planning on "
            f"{_instance_shown(gpu, device)}, not the whole card; a process sees one MIG instance, so no "
            f"{ranks} span instances; "
        )
        if named:
            text += (
                f"{key} names that instance ({device['uuid']}), which `ktinfra render` exports as "
                f"CUDA_VISIBLE_DEVICES instead of the GPU index {index}"
            )
        else:
            which = "that instance" if device is None else f"MIG device {device['index']}"
            text += (
                f"the facts lack {which}'s UUID (`nvidia-smi -L`, kept in a capture as nvidia-smi-L.txt; "
                f"captures made before it lack it), so {key} is null and `ktinfra render` exports the GPU "
                f"index {index} as CUDA_VISIBLE_DEVICES, which does not choose the instance: gather the "
                "facts again on the host (`ktinfra facts --json` or `--capture`) and plan again, or set "
                f'{key} to ["MIG-..."], the UUID `nvidia-smi -L` prints for {which} under GPU {index}'
            )
        warnings.append(text)
    return warnings


def too_old_for_kt(gpu: dict) -> bool:
    cc = compute_capability(gpu)
    return cc is not None and cc < MIN_COMPUTE_CAPABILITY


def kt_capable_groups(gpus: list[dict]) -> list[list[dict]]:
    """Identical-GPU groups among the GPUs KT can run on (compute capability >= 8.0 or unknown); among all
    of them when none qualifies, which the plan then reports as a problem. GPUs without usable memory (MIG
    on, no instance) are never in a group: callers plan only when usable_gpus() has some."""
    gpus = usable_gpus(gpus)
    return identical_gpu_groups([g for g in gpus if not too_old_for_kt(g)] or gpus)


def left_out_reason(gpus: list[dict], used: list[dict], ranks: str, also: str | None = None) -> str:
    """Why a plan runs on `used` and not on the rest of `gpus` (its gpu_indices reason); `also`: one more
    cause, the caller's own."""
    why = f"{', '.join(str(g.get('index')) for g in used)}: {gpu_names(used)}"
    left = [g for g in gpus if all(g is not u for u in used)]
    if not left:
        return why + ", every GPU on the host"
    old = [g for g in left if too_old_for_kt(g) and has_memory(g)]
    causes = [f"compute capability below 8.0 ({', '.join(str(g.get('index')) for g in old)})"] if old else []
    empty = [g for g in left if not has_memory(g)]
    if empty:
        shown = ", ".join(str(g.get("index")) for g in empty)
        causes.append(f"MIG enabled without usable instances ({shown})")
    if any(g.get("mig") for g in gpus if has_memory(g)):
        causes.append(f"{ranks} cannot span MIG instances: a MIG-enabled GPU gives one instance to the run")
    if len(kt_capable_groups(gpus)) > 1:
        causes.append(
            f"{ranks} must be identical GPUs (same name, memory within 10 %); the ones used hold the most "
            "memory"
        )
    because = "; ".join(causes)
    if also:
        because += (" and " if because else "") + also
    return f"{why}; left out {gpu_names(left, listed=True)}: {because}"


def gpu_memory_bytes(gpus: list[dict]) -> int:
    """Memory of the smallest of `gpus`: tensor-parallel and data-parallel ranks are sized alike."""
    return min(g["memory_mib"] for g in gpus) * MIB


# ECC on a GDDR card keeps 1/16 of its memory for check bits (an RTX A6000: 49140 MiB off, 46068 MiB on);
# the same model with ECC set differently is still one kind of GPU, sized by its smallest rank
SAME_MODEL_MEMORY_RATIO = 0.9


def identical_gpu_groups(gpus: list[dict]) -> list[list[dict]]:
    """GPUs grouped by model, in index order: only identical GPUs share tensor-parallel ranks. The same name
    with memory within SAME_MODEL_MEMORY_RATIO (ECC on or off) is one model; ranks are sized by the smallest
    (gpu_memory_bytes). A MIG-enabled GPU is a group of its own: CUDA shows a process one MIG instance, and
    NCCL does not connect MIG instances, so no tensor- or data-parallel ranks span instances, of one GPU or
    of several."""
    groups: list[list[dict]] = []
    for gpu in sorted(gpus, key=lambda g: -(g.get("memory_mib") or 0)):
        group = next((gr for gr in groups if not gpu.get("mig") and _same_model(gr[0], gpu)), None)
        if group is None:
            groups.append([gpu])
        else:
            group.append(gpu)
    order = {id(g): n for n, g in enumerate(gpus)}
    return sorted(
        (sorted(group, key=lambda g: order[id(g)]) for group in groups), key=lambda gr: order[id(gr[0])]
    )


def _same_model(largest: dict, gpu: dict) -> bool:
    """Whether `gpu` is of the model of `largest`, the first (largest) GPU of a group."""
    if largest.get("mig") or largest.get("name") != gpu.get("name"):
        return False
    if not (largest.get("memory_mib") and gpu.get("memory_mib")):
        return largest.get("memory_mib") == gpu.get("memory_mib")
    return gpu["memory_mib"] >= SAME_MODEL_MEMORY_RATIO * largest["memory_mib"]


def most_memory_first(group: list[dict], count: int) -> list[dict]:
    """The `count` GPUs of an identical-GPU group holding the most memory (ECC off), in the group's order."""
    kept = sorted(group, key=lambda g: -(g.get("memory_mib") or 0))[:count]
    return [g for g in group if any(g is k for k in kept)]


def gpu_names(gpus: list[dict], *, listed: bool = False) -> str:
    """'2 x NVIDIA H100 80GB HBM3' for identical GPUs, else (or when `listed`) each with index and memory."""
    kinds = {(g.get("name"), g.get("memory_mib"), g.get("index") if g.get("mig") else None) for g in gpus}
    if not listed and len(kinds) == 1:
        mig = f" (a {gb(gpus[0]['memory_mib'] * MIB)} MIG instance)" if gpus[0].get("mig") else ""
        return f"{len(gpus)} x {gpus[0].get('name')}{mig}"
    return ", ".join(f"GPU {g.get('index')} ({g.get('name')}, {_memory_shown(g)})" for g in gpus)


def _memory_shown(gpu: dict) -> str:
    if not has_memory(gpu):
        return "MIG, no usable instance"
    return gb(gpu["memory_mib"] * MIB) + (" MIG instance" if gpu.get("mig") else "")


def unknown_capability_warnings(gpus: list[dict], checks: str) -> list[str]:
    unknown = [g for g in gpus if compute_capability(g) is None]
    return [
        f"compute capability of GPU {g.get('index')} ({g.get('name')}) unknown: cannot check {checks}; "
        "assuming it meets them"
        for g in unknown
    ]


def data_disk(facts: dict) -> dict | None:
    """The real (non-tmpfs) filesystem with the most free space: where models and CPU weights go."""
    disks = [
        d
        for d in facts.get("disks") or []
        if isinstance(d, dict)
        and d.get("fstype") not in ("tmpfs", "devtmpfs")
        and d.get("avail_bytes") is not None
    ]
    return max(disks, key=lambda d: d["avail_bytes"], default=None)


def _version(text: str | None) -> tuple[int, ...] | None:
    parts = []
    for piece in str(text or "").split("-")[0].split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts) or None


def _driver_problems(facts: dict, profile: dict) -> list[str]:
    """The NVIDIA driver against the oldest that starts the profile's CUDA builds."""
    least = profile.get("nvidia_driver_min")
    if not facts.get("gpus") or not least:
        return []
    driver = (facts.get("nvidia") or {}).get("driver_version") or next(
        (g.get("driver_version") for g in facts["gpus"] if g.get("driver_version")), None
    )
    found = _version(driver)
    if found is None or found >= _version(least):  # hand-written facts often leave it out: nothing to judge
        return []
    return [
        f"NVIDIA driver {driver} is older than {least}, the oldest that runs the {profile['name']} envs' "
        "CUDA 12 builds: update the driver"
    ]


def _memory_node_warnings(facts: dict) -> list[str]:
    """NUMA nodes numa_node_cores left out for the cpuset's mems, or could not leave out."""
    allowed = memory_nodes_allowed(facts)
    if allowed is None:
        return []
    on_cpus, planned = set(_cpu_node_cores(facts)), set(numa_node_cores(facts))
    mems = facts["cpu"].get("memory_nodes_allowed")
    if on_cpus and not allowed & planned:
        return [
            "no NUMA node with CPUs this process may use is one whose memory it may allocate "
            f"(Mems_allowed_list {mems}): thread pools are planned on the CPUs' nodes, and their expert "
            "weights land on other nodes"
        ]
    if on_cpus - planned:
        return [
            f"NUMA node(s) {_nodes(on_cpus - planned)} hold CPUs this process may use, but not memory it may "
            f"allocate (Mems_allowed_list {mems}): no thread pool is planned there, since kt-kernel puts a "
            "pool's expert weights on its own node; widen the cpuset's mems to use them"
        ]
    return []


def _visibility_warnings(facts: dict) -> list[str]:
    """What the capturing process's CUDA_VISIBLE_DEVICES left out of the facts, and how its numbers read."""
    visible = facts.get("cuda_visible_devices")
    if not isinstance(visible, dict):
        return []
    warnings = []
    if visible.get("hidden_indices"):
        hidden = ", ".join(str(i) for i in visible["hidden_indices"])
        warnings.append(
            f"planned without GPU(s) {hidden}: CUDA_VISIBLE_DEVICES={visible.get('value')!r} was set where "
            "the facts were taken (the GPUs this user was given; the units select the planned ones "
            "themselves); unset it there to plan for every GPU"
        )
    if visible.get("note"):
        warnings.append(f"CUDA_VISIBLE_DEVICES={visible.get('value')!r}: {visible['note']}")
    return warnings


def platform_checks(facts: dict, profile: dict, *, needs_amx_kernel: bool) -> tuple[list[str], list[str]]:
    """glibc (wheel tags) and kernel (AMX tile permission) against the stack profile: problems, warnings."""
    problems, warnings = [], []
    os_facts = facts.get("os") or {}
    glibc, glibc_min = _version(os_facts.get("glibc")), _version(profile.get("glibc_min"))
    if glibc_min and glibc is None:
        warnings.append(
            f"glibc version unknown; the {profile['name']} wheels need glibc >= {profile['glibc_min']}"
        )
    elif glibc_min and glibc < glibc_min:
        problems.append(
            f"glibc {os_facts['glibc']} is older than {profile['glibc_min']}, which the {profile['name']} "
            "wheels (manylinux) need"
        )
    problems += _driver_problems(facts, profile)
    warnings += _memory_node_warnings(facts) + _visibility_warnings(facts)
    kernel, kernel_min = _version(os_facts.get("kernel")), _version(profile.get("kernel_min"))
    permission = (facts.get("cpu") or {}).get("amx_permission")
    if needs_amx_kernel and isinstance(permission, str) and permission.startswith("refused"):
        problems.append(
            f"kernel {os_facts.get('kernel')} refused ARCH_REQ_XCOMP_PERM (AMX tiles) when the facts were "
            f"taken ({permission.removeprefix('refused: ')}); kt-kernel's AMX code would die with SIGILL"
        )
    elif needs_amx_kernel and permission == "granted":
        pass  # the kernel granted tiles, whatever its release says (a backport)
    elif needs_amx_kernel and kernel and kernel_min and kernel < kernel_min:
        problems.append(
            f"kernel {os_facts['kernel']} is older than {profile['kernel_min']}: AMX tiles need "
            "ARCH_REQ_XCOMP_PERM (Linux 5.16+)"
        )
    elif needs_amx_kernel and kernel_min and kernel is None:
        warnings.append(
            f"kernel version unknown ({os_facts.get('kernel')!r}); AMX tiles need Linux >= "
            f"{profile['kernel_min']} (ARCH_REQ_XCOMP_PERM)"
        )
    return problems, warnings


def host_summary(facts: dict) -> dict:
    cpu = facts["cpu"]
    return {
        "cpu_model": cpu.get("model"),
        "physical_cores": cpu["physical_cores"],
        "logical_cpus": cpu["logical_cpus"],
        "numa_nodes": numa_nodes_in_use(facts),
        "amx": has_amx(facts),  # the CPU's flags
        "amx_usable": has_amx(facts)
        and amx_blocked_by_kernel(facts) is None,  # ... and the kernel grants tiles
        "ram_bytes": facts["memory"]["total_bytes"],
        "gpus": [
            {k: g.get(k) for k in ("index", "name", "memory_mib", "compute_capability")}
            for g in facts["gpus"]
        ],
        "container": facts.get("container"),
    }
