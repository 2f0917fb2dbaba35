"""Probe: CPU flags, usable topology, and whether the kernel grants this process the AMX tile state.

Runs on the target with any python3 (stdlib only). Prints one JSON line.
KT's "Illegal instruction" reports come from processes that execute AMX without first asking the
kernel for XTILEDATA (arch_prctl ARCH_REQ_XCOMP_PERM, Linux >= 5.16).
"""

import ctypes
import json
import os
import platform

SYS_ARCH_PRCTL = 158  # x86_64
ARCH_GET_XCOMP_SUPP = 0x1021
ARCH_GET_XCOMP_PERM = 0x1022
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18
AMX_FLAGS = ("amx_tile", "amx_int8", "amx_bf16")
SYS_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237}
MPOL_DEFAULT, MPOL_BIND = 0, 2
NODEMASK_WORDS = 16  # 1024 nodes: more than any kernel's MAX_NUMNODES


def cpu_flags() -> set:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def _libc():
    """libc, for syscall(2) with errno kept."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def arch_prctl_probe() -> dict:
    if platform.machine() != "x86_64":
        return {"error": f"arch_prctl probe needs x86_64, machine is {platform.machine()}"}
    libc = _libc()
    supported = ctypes.c_uint64(0)
    rc = libc.syscall(SYS_ARCH_PRCTL, ARCH_GET_XCOMP_SUPP, ctypes.byref(supported))
    supp_errno = ctypes.get_errno() if rc != 0 else 0
    rc_req = libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, ctypes.c_ulong(XFEATURE_XTILEDATA))
    req_errno = ctypes.get_errno() if rc_req != 0 else 0
    perm = ctypes.c_uint64(0)
    rc_perm = libc.syscall(SYS_ARCH_PRCTL, ARCH_GET_XCOMP_PERM, ctypes.byref(perm))
    perm_errno = ctypes.get_errno() if rc_perm != 0 else 0
    return {
        "xcomp_supp": supported.value if rc == 0 else None,
        "xcomp_supp_errno": supp_errno,
        "req_rc": rc_req,
        "req_errno": req_errno,
        "req_error": os.strerror(req_errno) if req_errno else None,
        "xcomp_perm": perm.value if rc_perm == 0 else None,
        "xcomp_perm_errno": perm_errno,
        "xtiledata_supported": bool(rc == 0 and supported.value >> XFEATURE_XTILEDATA & 1),
        "xtiledata_granted": bool(rc_perm == 0 and perm.value >> XFEATURE_XTILEDATA & 1),
    }


def mempolicy_probe(node: int) -> dict:
    """Whether this process may set a NUMA memory policy: bind to `node`, then back to the default.
    kt-kernel binds each thread pool's expert weights to its node this way; docker's and podman's default
    seccomp profiles refuse set_mempolicy (EPERM) without CAP_SYS_NICE, and kt-kernel then only prints
    'set_mempolicy: Operation not permitted' and runs with its weights wherever they were first touched."""
    machine = platform.machine()
    number = SYS_SET_MEMPOLICY.get(machine)
    if number is None:
        return {"mempolicy_error": f"set_mempolicy probe needs x86_64 or aarch64, machine is {machine}"}
    libc = _libc()
    bits = ctypes.sizeof(ctypes.c_ulong) * 8
    mask = (ctypes.c_ulong * NODEMASK_WORDS)()
    mask[node // bits] = 1 << node % bits
    # maxnode counts one past the mask's last bit, as libnuma passes it (the kernel drops one)
    rc = libc.syscall(number, MPOL_BIND, ctypes.byref(mask), ctypes.c_ulong(NODEMASK_WORDS * bits + 1))
    errno = ctypes.get_errno() if rc != 0 else 0
    if rc == 0:
        libc.syscall(number, MPOL_DEFAULT, None, ctypes.c_ulong(0))
    return {
        "mempolicy_node": node,
        "mempolicy_rc": rc,
        "mempolicy_errno": errno,
        "mempolicy_error": os.strerror(errno) if errno else None,
    }


def cpulist(text: str) -> list:
    cpus = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def topology() -> dict:
    """Usable CPUs (affinity), their distinct physical cores, and the NUMA nodes holding them; and one row
    [cpu, core_id, package_id, node] per online CPU ("" where sysfs does not say), from which the suite
    counts the cores as `ktinfra facts` does (a CPU quota lowers them: kthost.facts_cores)."""
    usable = sorted(os.sched_getaffinity(0))
    try:
        online = cpulist(read("/sys/devices/system/cpu/online"))
    except (OSError, ValueError):
        online = usable
    node_of = {}
    nodes = {}
    node_root = "/sys/devices/system/node"
    if os.path.isdir(node_root):
        for entry in sorted(os.listdir(node_root)):
            if entry.startswith("node") and entry[4:].isdigit():
                cpus = cpulist(read(f"{node_root}/{entry}/cpulist"))
                node_of.update(dict.fromkeys(cpus, int(entry[4:])))
                held = sorted(set(cpus) & set(usable))
                if held:
                    nodes[int(entry[4:])] = held
    cores = set()
    rows = []
    for cpu in sorted(set(online) | set(usable)):
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            core = (read(f"{base}/physical_package_id"), read(f"{base}/core_id"))
        except OSError:
            core = ("", "")
        if cpu in usable:
            cores.add(core if core[1] else ("?", str(cpu)))
        rows.append([cpu, core[1], core[0], node_of.get(cpu, "")])
    return {
        "usable_cpus": usable,
        "physical_cores": len(cores),  # affinity alone: the suite replaces it with facts' count
        "numa_nodes": sorted(nodes) or [0],
        "cpu_rows": rows,
    }


# ktinfra/facts/capture.py's CGROUP_FILES and cgroup.txt: "<path>: <value>" for the process's own cgroup
# directories and their ancestors, which ktinfra.facts.cgroup reads (the smallest quota, the cpusets' overlap)
CGROUP_FILES = (
    "cpuset.cpus.effective",
    "cpu.max",
    "memory.max",
    "cpu.cfs_quota_us",
    "cpu.cfs_period_us",
    "cpuset.cpus",
    "memory.limit_in_bytes",
    "memory.current",
    "memory.usage_in_bytes",
)


def cgroup_dirs() -> list:
    root = "/sys/fs/cgroup"
    dirs = []
    try:
        own = read("/proc/self/cgroup")
    except OSError:
        return dirs
    for line in own.splitlines():
        _, _, rest = line.partition(":")
        controllers, sep, path = rest.partition(":")
        if not sep:
            continue
        if controllers == "":
            mount = root if os.path.exists(f"{root}/cgroup.controllers") else None
        else:
            names = set(controllers.split(","))
            mount = next(
                (
                    f"{root}/{c}"
                    for c in ("cpu", "cpuset", "memory")
                    if c in names and os.path.isdir(f"{root}/{c}")
                ),
                None,
            )
        if mount is None:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts) + 1):
            candidate = "/".join([mount, *parts[:depth]])
            if os.path.isdir(candidate) and candidate not in dirs:
                dirs.append(candidate)
    return dirs


def cgroup_text() -> str:
    lines = []
    for directory in cgroup_dirs():
        for name in CGROUP_FILES:
            try:
                value = read(f"{directory}/{name}")
            except OSError:
                continue
            if value:
                lines.append(f"{directory}/{name}: {value}")
    return "\n".join(lines) + "\n" if lines else ""


def main() -> None:
    flags = cpu_flags()
    out = {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "amx_flags": {f: f in flags for f in AMX_FLAGS},
        "avx512f": "avx512f" in flags,
        "avx2": "avx2" in flags,
        "flags": sorted(f for f in flags if f.startswith(("avx", "amx"))),
    }
    out.update(topology())
    out["cgroup"] = cgroup_text()
    out.update(arch_prctl_probe())
    out.update(mempolicy_probe(out["numa_nodes"][0]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
