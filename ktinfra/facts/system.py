"""Sections other than cpu and gpus: memory, os, disks, tuning, init and container detection."""

from __future__ import annotations

import re

from ktinfra.facts.bounds import MAX_DISK_BYTES, MAX_MEMORY_BYTES, within
from ktinfra.facts.cgroup import CgroupLimits
from ktinfra.facts.numa_memory import allowed_node_bytes, node_memory

# glibc shipped by distribution releases, used only when no `ldd --version` was captured (os.glibc_source
# then says "os-release"). From the distributions' package archives (libc6 / glibc package versions).
GLIBC_BY_RELEASE = {
    ("ubuntu", "18.04"): "2.27",
    ("ubuntu", "20.04"): "2.31",
    ("ubuntu", "22.04"): "2.35",
    ("ubuntu", "24.04"): "2.39",
    ("ubuntu", "24.10"): "2.40",
    ("ubuntu", "25.04"): "2.41",
    ("debian", "10"): "2.28",
    ("debian", "11"): "2.31",
    ("debian", "12"): "2.36",
    ("debian", "13"): "2.41",
    ("centos", "7"): "2.17",
    ("rhel", "8"): "2.28",
    ("rhel", "9"): "2.34",
    ("rhel", "10"): "2.39",
    ("amzn", "2"): "2.26",
    ("amzn", "2023"): "2.34",
}
RHEL_LIKE = {"rhel", "centos", "rocky", "almalinux", "ol"}
PSEUDO_FSTYPES = {
    "tmpfs",
    "devtmpfs",
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "squashfs",
    "devpts",
    "mqueue",
    "shm",
}
# Copy-on-write layers: this container's own / may be one; any other such mount is another container's.
LAYER_FSTYPES = {"overlay", "aufs", "fuse-overlayfs", "fuse.fuse-overlayfs"}
# Where container engines and snapd mount other containers' layers, volumes and netns (seen from the host or
# from a container sharing its mount table): never a disk of this host to put models on.
ENGINE_MOUNT_ROOTS = (
    "/var/lib/docker",
    "/var/lib/containers",
    "/var/lib/containerd",
    "/var/lib/kubelet",
    "/run/containerd",
    "/run/docker",
    "/snap",
)
# System trees: container engines bind-mount single files there (/etc/hosts, /etc/resolv.conf, the NVIDIA
# toolkit's /usr/bin/nvidia-smi and libraries); df lists each with the free space of the host disk behind it.
SYSTEM_MOUNT_ROOTS = ("/etc", "/usr", "/boot", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
CONTAINER_CGROUP = re.compile(
    r"/(docker|kubepods|containerd|lxc|libpod|podman|machine\.slice/libpod|garden|crio)\b"
)
# `uname -m` of Linux machines. GNU `uname -a` ends "<machine> <processor> <platform> GNU/Linux", busybox's
# "<machine> Linux" (Alpine) or "<machine> GNU/Linux", toybox's "<machine> Toybox": the machine is the last
# such word after the kernel version.
MACHINE = re.compile(
    r"x86_64|i[3-6]86|aarch64(_be)?|armv\d+\w*|ppc64(le)?|ppcle|ppc|s390x?|riscv(32|64)|loongarch(32|64)"
    r"|mips(64)?(el)?|sparc(64)?|ia64"
)
GOVERNORS = {"performance", "powersave", "ondemand", "schedutil", "conservative", "userspace"}


def memory_facts(files: dict[str, str], limits: CgroupLimits) -> dict:
    meminfo = _meminfo(files.get("meminfo.txt"))
    total = within(meminfo.get("MemTotal"), 1, MAX_MEMORY_BYTES)
    hugetlb = _hugetlb_bytes(meminfo)
    # MemTotal counts the static hugetlb pool, which ordinary allocations (the expert weights, the KV
    # pool, page cache) cannot use; MemAvailable already leaves it out
    usable = max(total - hugetlb, 1) if total is not None else None
    # A cgroup limit only caps the RAM /proc/meminfo shows (in a container, the host's): it may exceed the
    # RAM there is (a 512 GiB limit on a 504 GiB host), so without meminfo's number the memory is unknown
    available = meminfo.get("MemAvailable")
    nodes = node_memory(files, meminfo)
    # a cpuset's mems (a container pinned to one socket) keep this process off the other nodes' memory
    allowed = allowed_node_bytes(nodes.usable, files)
    return {
        "total_bytes": _capped(_capped(usable, limits.memory_limit_bytes), allowed),
        "meminfo_total_bytes": total,
        "cgroup_limit_bytes": limits.memory_limit_bytes,
        "available_bytes": _capped(_capped(available, limits.memory_free_bytes), allowed),
        "hugepages_total": meminfo.get("HugePages_Total"),
        "hugetlb_bytes": hugetlb,
        # per NUMA node: kt-kernel binds each thread pool's share of the experts to its node's memory
        "numa_node_bytes": nodes.usable,
        "numa_node_bytes_source": nodes.source,
        # MemTotal per node, huge pages included: which nodes have memory at all (hwloc counts those)
        "numa_node_total_bytes": nodes.totals,
    }


def _capped(value: int | None, cap: int | None) -> int | None:
    return None if value is None else min(value, cap) if cap is not None else value


def _hugetlb_bytes(meminfo: dict[str, int]) -> int:
    """Memory held by huge pages: Hugetlb (every page size, Linux 4.16+), else the default-size pool."""
    if "Hugetlb" in meminfo:
        return meminfo["Hugetlb"]
    pages, size = meminfo.get("HugePages_Total", 0), meminfo.get("Hugepagesize", 0)
    return min(pages * size, MAX_MEMORY_BYTES)


def _meminfo(text: str | None) -> dict[str, int]:
    values = {}
    for match in re.finditer(r"^(\w+):\s+(\d{1,20})(\s*kB)?\s*$", text or "", re.MULTILINE):
        value = within(int(match.group(2)) * (1024 if match.group(3) else 1), 0, MAX_MEMORY_BYTES)
        if value is not None:
            values[match.group(1)] = value
    return values


def os_facts(files: dict[str, str]) -> dict:
    release = {}
    for match in re.finditer(r"^(\w+)=(.*?)\s*$", files.get("os-release.txt") or "", re.MULTILINE):
        value = match.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":  # os-release(5) allows both
            value = value[1:-1]
        release[match.group(1)] = value
    uname = (files.get("uname.txt") or "").split()
    os_id, version = release.get("ID"), release.get("VERSION_ID")
    glibc, source = _glibc_from_ldd(files.get("ldd.txt")), "ldd"
    if glibc is None:
        glibc, source = _glibc_from_release(os_id, version), "os-release"
    return {
        "id": os_id,
        "version_id": version,
        "pretty_name": release.get("PRETTY_NAME"),
        "kernel": _one_word(files.get("uname-r.txt")) or (uname[2] if len(uname) > 2 else None),
        "arch": _one_word(files.get("uname-m.txt")) or _machine(uname),
        "glibc": glibc,
        "glibc_source": source if glibc else None,
    }


def _one_word(text: str | None) -> str | None:
    """`uname -r` or `uname -m` output: one word, else None (older captures hold `uname -a` alone)."""
    words = (text or "").split()
    return words[0] if len(words) == 1 else None


def _machine(uname: list[str]) -> str | None:
    """The machine of `uname -a`'s words (sysname, nodename and release come first)."""
    known = next((word for word in reversed(uname[3:]) if MACHINE.fullmatch(word)), None)
    if known is None and len(uname) > 3 and uname[-1] == "GNU/Linux":
        return uname[-2]  # a machine name not listed above, in GNU's layout
    return known


def _glibc_from_ldd(text: str | None) -> str | None:
    """MAJOR.MINOR from `ldd (GNU libc) 2.39`; a development build's `2.40.9000` (Fedora Rawhide) is 2.40."""
    first = (text or "").strip().splitlines()[:1]
    match = re.search(r"(?<![\d.])(\d+\.\d+)(?:\.\d+)*\s*$", first[0]) if first else None
    return match.group(1) if match else None


def _glibc_from_release(os_id: str | None, version: str | None) -> str | None:
    if not os_id or not version:
        return None
    if os_id in RHEL_LIKE:
        os_id, version = ("centos" if version.startswith("7") else "rhel"), version.split(".")[0]
    return GLIBC_BY_RELEASE.get((os_id, version))


# a row of `df -B1 --output=source,fstype,size,used,avail,target`: GNU df prints the source and the mount
# point as they are, spaces included ("//nas/model store" of a CIFS share, "user@host:/my models" of
# sshfs); the three numbers between them anchor the split. The source is matched lazily: it ends at the
# first "<fstype> <number> <number> <number>" run, and the mount point is the rest of the line.
DF_ROW = re.compile(
    r"(?P<source>\S(?:.*?\S)?)\s+(?P<fstype>\S+)\s+(?P<size>-?\d+)\s+(?P<used>-?\d+)\s+(?P<avail>-?\d+)\s+(?P<mount>\S.*)"
)


def df_rows(text: str | None) -> list[dict]:
    """Rows of `df -B1 --output=source,fstype,size,used,avail,target`."""
    rows = []
    for line in (text or "").splitlines()[1:]:
        match = DF_ROW.fullmatch(line.lstrip())
        if match is None:
            continue  # "-" for a size df could not read, or a line cut short
        size, used, avail = (
            within(int(match.group(k)), 0, MAX_DISK_BYTES) for k in ("size", "used", "avail")
        )
        if match.group("avail").startswith("-"):
            avail = 0  # GNU df prints a negative Avail when the reserved blocks exceed what is free
        rows.append(
            {
                "source": match.group("source"),
                "fstype": match.group("fstype"),
                "size": size,
                "used": used,
                "avail": avail,
                "mount": match.group("mount"),
            }
        )
    return rows


def is_data_disk(row: dict) -> bool:
    """A real filesystem of this host (or of this container): not a pseudo filesystem, not another
    container's layer or engine mount. This container's own / stays even when it is an overlay."""
    mount = row["mount"]
    if row["fstype"] in PSEUDO_FSTYPES or (row["fstype"] in LAYER_FSTYPES and mount != "/"):
        return False
    roots = ("/proc", "/sys", "/dev", *SYSTEM_MOUNT_ROOTS, *ENGINE_MOUNT_ROOTS)
    return not any(mount == root or mount.startswith(root + "/") for root in roots)


def disk_facts(rows: list[dict]) -> tuple[list[dict], int | None]:
    """(real filesystems, /dev/shm size)."""
    disks = [
        {
            "mount": row["mount"],
            "avail_bytes": row["avail"],
            "size_bytes": row["size"],
            "used_bytes": row["used"],
            "fstype": row["fstype"],
            "source": row["source"],
        }
        for row in rows
        if is_data_disk(row)
    ]
    shm = next((row["size"] for row in rows if row["mount"] == "/dev/shm"), None)
    return disks, shm


def tuning_facts(files: dict[str, str]) -> dict:
    thp = re.search(r"\[(\w+)\]", files.get("thp.txt") or "")
    governor = None
    for line in (files.get("cpufreq.txt") or "").splitlines():
        if line.strip() in GOVERNORS:
            governor = line.strip()
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses; a few digits (the kernel writes
    # 0-3), as int() refuses a string of over 4300 digits
    balancing = re.fullmatch(r"[0-9]{1,9}", (files.get("numa_balancing.txt") or "").strip())
    return {
        "numa_balancing": int(balancing.group()) if balancing else None,
        "thp": thp.group(1) if thp else None,
        "cpufreq_governor": governor,
    }


def init_name(files: dict[str, str]) -> str | None:
    return (files.get("pid1.txt") or "").strip() or None


def container_evidence(
    files: dict[str, str], quota_cpus: float | None, online_cpus: int | None, disks: list[dict]
) -> list[str]:
    """Reasons to believe this is a container; "ignored: ..." entries were weighed and set aside."""
    evidence = []
    markers = _key_values(files.get("container.txt"))
    for name in ("proc-1-cgroup.txt", "proc-self-cgroup.txt", "cgroup.txt"):
        match = CONTAINER_CGROUP.search(files.get(name) or "")
        if match:
            evidence.append(f"{name} names a {match.group(1)} cgroup")
    if markers.get("/run/.containerenv") == "present":
        evidence.append("/run/.containerenv present (podman)")
    if markers.get("pid1 environ container"):
        evidence.append(f"PID 1 runs with container={markers['pid1 environ container']}")
    virt = markers.get("systemd-detect-virt --container", "")
    if virt and virt not in ("none", "docker", "unknown"):
        evidence.append(f"systemd-detect-virt --container: {virt}")
    root = next((d for d in disks if d["mount"] == "/"), None)
    if root is not None and root["fstype"] in LAYER_FSTYPES:
        evidence.append(f"/ is an {root['fstype']} filesystem (a container image's layers)")
    own_root_disk = root is not None and root["source"].startswith("/dev/") and root["fstype"] != "overlay"
    if quota_cpus is not None and online_cpus and quota_cpus < online_cpus:
        quota = f"CPU quota of {quota_cpus:g} CPUs on a host with {online_cpus}"
        # systemd-run -p CPUQuota= or a slice's quota puts a host's own session under a quota too
        if virt == "none" and own_root_disk:
            quota = f"ignored: {quota}, but systemd-detect-virt --container says none, / is {root['source']}"
        evidence.append(quota)

    docker_marks = []
    if markers.get("/.dockerenv") == "present":
        docker_marks.append("/.dockerenv present")
    if virt == "docker":
        docker_marks.append("systemd-detect-virt --container: docker")
    # systemd-detect-virt only looks for /.dockerenv; a VM booted from a container image keeps that file but
    # mounts its own block device as / (docker roots are overlay/graph-driver mounts).
    ignore_marks = own_root_disk and not any(not e.startswith("ignored:") for e in evidence)
    for mark in docker_marks:
        if ignore_marks:
            evidence.append(
                f"ignored: {mark}, but / is {root['source']} ({root['fstype']}), not a container layer"
            )
        else:
            evidence.append(mark)
    return evidence


def _key_values(text: str | None) -> dict[str, str]:
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip()] = value.strip()
    return values
