"""The capture folder: which files, how the live host produces each one, reading and writing them."""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ktinfra import __version__
from ktinfra.facts.gpus import (
    QUERY_FIELDS,
    QUERY_FIELDS_BEFORE_COMPUTE_CAP,
    QUERY_FIELDS_BEFORE_MIG,
    QUERY_FIELDS_OLDEST,
    from_csv,
    listing,
    xml_gpus,
)
from ktinfra.facts.noreplace import rename_no_replace
from ktinfra.facts.system import df_rows
from ktinfra.links import LinkLoop

CommandOrReader = list[str] | Callable[[], str | None]
SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 158, 0x1023, 18  # x86_64 (asm/prctl.h)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


COMMAND_TIMEOUT_S = 30.0
KILL_GRACE_S = 2.0
# commands that timed out during this collect_live(): a hung driver makes every nvidia-smi call hang, so the
# others are not started (five of them would stall the capture for minutes)
_hung: set[str] = set()


def _run(argv: list[str], any_status: bool = False, keep: Callable[[str], bool] | None = None) -> str | None:
    """stdout of a command, or None when it is missing or fails (the file is then skipped).

    `keep`: whether the output of a command that failed is still its real output (nvidia-smi exits 14 for a
    corrupt infoROM and 15 for a GPU that fell off the bus, after printing the other GPUs)."""
    if argv[0] in _hung or shutil.which(argv[0]) is None:
        return None
    # nproc (and OpenMP-aware tools) would report OMP_NUM_THREADS instead of what the kernel allows
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT")}
    env["LC_ALL"] = "C"
    try:
        # errors="replace": a stray byte (a locale-encoded model name, a broken driver) must not lose the file
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",  # not the locale's: a GBK locale could not write U+FFFD back, and the capture
            errors="replace",  # is read on other hosts; the commands themselves run under LC_ALL=C
            env=env,
        )
    except OSError:
        return None
    try:
        stdout, _ = proc.communicate(timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _hung.add(argv[0])
        _give_up(proc)
        return None
    if not stdout.strip():
        return None
    if proc.returncode == 0 or any_status or (keep is not None and keep(stdout)):
        return stdout
    return None


def _give_up(proc: subprocess.Popen) -> None:
    """Kill a command that ran past its time. One in uninterruptible sleep (nvidia-smi in a driver call that
    never returns: state D) dies only when that call returns; subprocess.run waited for it forever after its
    timeout. It is left after a short grace, its pipes closed (Popen reaps it later if it ever dies)."""
    proc.kill()
    try:
        proc.communicate(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        for pipe in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()


def _nvidia_smi(*args: str, keep: Callable[[str], bool]) -> str | None:
    return _run(["nvidia-smi", *args], keep=keep)


GPU_QUERIES = (QUERY_FIELDS, QUERY_FIELDS_BEFORE_MIG, QUERY_FIELDS_BEFORE_COMPUTE_CAP, QUERY_FIELDS_OLDEST)


def _gpu_query() -> str | None:
    """`nvidia-smi --query-gpu` CSV. A driver refuses the whole query for a field it does not know
    (mig.mode.current before R450, compute_cap before R510: every GPU was lost), so it is asked again
    without them; a first line before the CSV's header (which readers skip) says what was left out."""
    for fields in GPU_QUERIES:
        text = _nvidia_smi(f"--query-gpu={','.join(fields)}", "--format=csv", keep=from_csv)
        if text is None:
            continue
        left_out = [field for field in QUERY_FIELDS if field not in fields]
        if left_out:
            return (
                f"# ktinfra facts: this driver refused --query-gpu with {' and '.join(left_out)}; "
                f"asked again without {'it' if len(left_out) == 1 else 'them'}\n{text}"
            )
        return text
    return None


def _names_a_gpu(text: str) -> bool:
    return any(re.match(r"GPU\d+\t", line) for line in text.splitlines())


def _proc_status() -> str | None:
    text = _read("/proc/self/status")
    if text is None:
        return None
    keep = [line for line in text.splitlines() if line.startswith(("Cpus_allowed_list", "Mems_allowed_list"))]
    return "\n".join(keep) + "\n"


def _amx_permission() -> str | None:
    """arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) in this process: whether the kernel grants AMX
    tiles. The release alone misleads (distribution kernels before 5.16 carry the backport). Only asked on
    an x86_64 CPU whose flags show amx_tile; the permission stays with this short-lived process."""
    if platform.machine() != "x86_64" or " amx_tile" not in (_read("/proc/cpuinfo") or ""):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        rc = libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, ctypes.c_ulong(XFEATURE_XTILEDATA))
    except (OSError, AttributeError):
        return None
    return "granted\n" if rc == 0 else f"refused: {os.strerror(ctypes.get_errno())}\n"


def _cuda_visible_devices() -> str | None:
    """CUDA_VISIBLE_DEVICES when set (its numbers count in CUDA_DEVICE_ORDER, on a second line when set)."""
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        return None
    order = os.environ.get("CUDA_DEVICE_ORDER")
    return os.environ["CUDA_VISIBLE_DEVICES"] + "\n" + (f"CUDA_DEVICE_ORDER={order}\n" if order else "")


LIMIT_CONTROLLERS = {"cpu", "cpuset", "memory"}


def _cgroup_dirs() -> list[Path]:
    """Own cgroup directories and their ancestors up to the mount, per v1 hierarchy (cpu, cpuset, memory)
    or unified (v2).

    /proc/self/mountinfo says where each hierarchy is mounted: a v1 hierarchy may hold several controllers
    ("cpu,cpuacct" mounted at /sys/fs/cgroup/cpu,cpuacct, with or without a cpu link to it) and may be
    mounted anywhere; and a container's mount shows a subtree (root /docker/abc), so the own path of
    /proc/self/cgroup is taken relative to that mount's root."""
    own = _read("/proc/self/cgroup") or ""
    mounts = _cgroup_mounts(_read("/proc/self/mountinfo"), own)
    dirs: list[Path] = []
    for line in own.splitlines():
        _, _, rest = line.partition(":")
        controllers, sep, path = rest.partition(":")
        if not sep:
            continue
        names = set(controllers.split(",")) - {""}
        if names and not names & LIMIT_CONTROLLERS:
            continue  # named (name=systemd) and other hierarchies hold no limit read here
        found = _mount_of(mounts, names, path)
        if found is None:
            continue
        mount, inside = found
        for depth in range(len(inside) + 1):
            candidate = mount.joinpath(*inside[:depth])
            if candidate.is_dir() and candidate not in dirs:
                dirs.append(candidate)
    return dirs


def _cgroup_mounts(mountinfo: str | None, own: str) -> list[tuple[set[str], str, Path]]:
    """(controllers, root inside the hierarchy, mount point) of each cgroup mount; controllers are empty
    for cgroup2. Without mountinfo, the usual places under /sys/fs/cgroup of the hierarchies in `own`."""
    if mountinfo is None:
        base, guessed = Path("/sys/fs/cgroup"), []
        for line in own.splitlines():
            controllers = line.partition(":")[2].partition(":")[0]
            names = set(controllers.split(",")) - {""}
            places = [controllers, *sorted(names & LIMIT_CONTROLLERS)] if names else [""]
            guessed += [(names, "/", base / place) for place in places]
        return guessed
    mounts = []
    for line in mountinfo.splitlines():
        fields, sep, tail = line.partition(" - ")
        fields, tail = fields.split(), tail.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        controllers = set(tail[2].split(",")) if tail[0] == "cgroup" else set()
        mounts.append((controllers, _unescape(fields[3]), Path(_unescape(fields[4]))))
    return mounts


def _mount_of(
    mounts: list[tuple[set[str], str, Path]], names: set[str], path: str
) -> tuple[Path, list[str]] | None:
    """The mount of the hierarchy `names` (empty: cgroup2) whose root holds `path`, the deepest such root,
    and the parts of `path` below it. A mount whose root does not hold it (a cgroup namespace shows "/.."
    there) gives its mount point alone."""
    best = None
    for controllers, root, point in mounts:
        if (not names and controllers) or (names and not names <= controllers):
            continue
        if not point.is_dir():
            continue
        inside = _below(root, path)
        if inside is None:
            best = best or (point, [], -1)
        elif best is None or len(root) > best[2]:
            best = (point, inside, len(root))
    return None if best is None else best[:2]


def _below(root: str, path: str) -> list[str] | None:
    root_parts = [p for p in root.split("/") if p]
    parts = [p for p in path.split("/") if p]
    return parts[len(root_parts) :] if parts[: len(root_parts)] == root_parts else None


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


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


def _cgroup_limits() -> str | None:
    lines = []
    for directory in _cgroup_dirs():
        for name in CGROUP_FILES:
            value = _read(str(directory / name))
            if value is not None and value.strip():
                lines.append(f"{directory / name}: {value.strip()}")
        # v1: the tightest memory limit of this cgroup and every ancestor, also those above what a container
        # sees (docker on cgroup v1 mounts the container's own cgroup as /sys/fs/cgroup/memory, so a limit
        # on its --cgroup-parent is in no memory.limit_in_bytes it can read)
        stat = (_read(str(directory / "memory.stat")) or "").splitlines()
        line = next((ln.strip() for ln in stat if ln.startswith("hierarchical_memory_limit ")), None)
        if line:
            lines.append(f"{directory / 'memory.stat'}: {line}")
    return "\n".join(lines) + "\n" if lines else None


def _cpufreq() -> str | None:
    base = Path("/sys/devices/system/cpu/cpu0/cpufreq")
    if not base.is_dir():
        return None
    listing = "\n".join(sorted(p.name for p in base.iterdir()))
    return f"{listing}\n{(_read(str(base / 'scaling_governor')) or '').strip()}\n"


def _node_meminfo() -> str | None:
    """/sys/devices/system/node/node*/meminfo, one after another (each line names its node)."""
    base = Path("/sys/devices/system/node")
    nodes = sorted(
        (p for p in (base.iterdir() if base.is_dir() else ()) if re.fullmatch(r"node\d+", p.name)),
        key=lambda p: int(p.name[4:]),
    )
    texts = [text for p in nodes if (text := _read(str(p / "meminfo")))]
    return "".join(texts) or None


def _node_hugepages() -> str | None:
    """Each node's huge page pool of every size, as `grep -H . .../nr_hugepages` prints it ("PATH:COUNT")."""
    lines = []
    for path in sorted(
        Path("/sys/devices/system/node").glob("node[0-9]*/hugepages/hugepages-*kB/nr_hugepages")
    ):
        count = (_read(str(path)) or "").strip()
        if count.isdigit():
            lines.append(f"{path}:{count}\n")
    return "".join(lines) or None


def _pid1_environ_container() -> str:
    raw = _read("/proc/1/environ") or ""
    return next((item.split("=", 1)[1] for item in raw.split("\0") if item.startswith("container=")), "")


def _container_markers() -> str:
    virt = _run(["systemd-detect-virt", "--container"], any_status=True) or ""  # exit status 1 with "none"
    lines = [
        f"/.dockerenv: {'present' if os.path.exists('/.dockerenv') else 'absent'}",
        f"/run/.containerenv: {'present' if os.path.exists('/run/.containerenv') else 'absent'}",
        f"systemd-detect-virt --container: {virt.strip() or 'unknown'}",
        f"pid1 environ container: {_pid1_environ_container()}",
    ]
    return "\n".join(lines) + "\n"


DF = ["df", "-B1", "--output=source,fstype,size,used,avail,target"]


def _df_lists_a_filesystem(text: str) -> bool:
    return bool(df_rows(text))


def _df() -> str | None:
    """df's listing. It is kept when df exits 1 after listing every other filesystem over one it cannot
    read (a dead FUSE mount: "Transport endpoint is not connected"; a stale NFS handle). When df hangs (a
    hard NFS mount whose server is gone blocks statfs), `df -l` is asked once more: it skips network
    filesystems, so the local disks are still known."""
    text = _run(DF, keep=_df_lists_a_filesystem)
    if text is None and "df" in _hung:
        _hung.discard("df")
        text = _run([*DF, "-l"], keep=_df_lists_a_filesystem)
    return text


# file name -> how the live host produces it (same order as the capture README lists them)
SOURCES: dict[str, CommandOrReader] = {
    "lscpu.txt": ["lscpu"],
    "lscpu.json": ["lscpu", "-J"],
    "lscpu-p.txt": ["lscpu", "-p=CPU,Core,Socket,Node"],
    "cpuinfo.txt": lambda: _read("/proc/cpuinfo"),
    "meminfo.txt": lambda: _read("/proc/meminfo"),
    "nproc.txt": ["nproc"],
    "numactl-hardware.txt": ["numactl", "--hardware"],
    # each node's memory as the kernel counts it (numactl may be missing; its sizes are these, in MB)
    "node-meminfo.txt": _node_meminfo,
    # each node's huge pages of every size (node-meminfo.txt counts the default size only)
    "node-hugepages.txt": _node_hugepages,
    "nvidia-smi-query.csv": _gpu_query,
    "nvidia-smi-q.xml": ["nvidia-smi", "-q", "-x"],
    "nvidia-smi-topo.txt": ["nvidia-smi", "topo", "-m"],
    # the MIG devices' UUIDs, which CUDA_VISIBLE_DEVICES needs to select one (the XML lists no MIG UUID)
    "nvidia-smi-L.txt": ["nvidia-smi", "-L"],
    # only when set: the GPUs a shared server handed this user (facts keep those alone)
    "cuda-visible-devices.txt": _cuda_visible_devices,
    "cgroup.txt": _cgroup_limits,
    "proc-self-status.txt": _proc_status,
    "proc-self-cgroup.txt": lambda: _read("/proc/self/cgroup"),
    "proc-1-cgroup.txt": lambda: _read("/proc/1/cgroup"),
    "container.txt": _container_markers,
    "os-release.txt": lambda: _read("/etc/os-release") or _read("/usr/lib/os-release"),
    "uname.txt": ["uname", "-a"],
    # each field alone: `uname -a` joins them with spaces, and a host name may hold one (or be empty)
    "uname-s.txt": ["uname", "-s"],
    "uname-r.txt": ["uname", "-r"],
    "uname-m.txt": ["uname", "-m"],
    "ldd.txt": ["ldd", "--version"],
    "df.txt": _df,
    # MOUNTPOINTS needs util-linux >= 2.37 (Ubuntu 22.04); older lsblk only knows MOUNTPOINT
    "lsblk.json": lambda: (
        _run(["lsblk", "-J", "-b", "-o", "NAME,MAJ:MIN,RM,SIZE,RO,TYPE,MOUNTPOINTS"])
        or _run(["lsblk", "-J", "-b", "-o", "NAME,MAJ:MIN,RM,SIZE,RO,TYPE,MOUNTPOINT"])
    ),
    "thp.txt": lambda: _read("/sys/kernel/mm/transparent_hugepage/enabled"),
    "numa_balancing.txt": lambda: _read("/proc/sys/kernel/numa_balancing"),
    "cpufreq.txt": _cpufreq,
    "pid1.txt": lambda: _read("/proc/1/comm"),
    "amx-permission.txt": _amx_permission,
}

# a command exiting non-zero keeps its file when the output still holds what the file is for (nvidia-smi
# exits 14 for a corrupt infoROM and 15 for a GPU that fell off the bus, after printing the healthy GPUs;
# df's own rule is in _df)
KEEP_ON_FAILURE: dict[str, Callable[[str], bool]] = {
    "nvidia-smi-q.xml": xml_gpus,
    "nvidia-smi-topo.txt": _names_a_gpu,
    "nvidia-smi-L.txt": listing,
}


def collect_live() -> dict[str, str]:
    """Run every source on this host; what is missing here is left out."""
    files = {}
    _hung.clear()
    try:
        for name, source in SOURCES.items():
            text = _run(source, keep=KEEP_ON_FAILURE.get(name)) if isinstance(source, list) else source()
            if text is not None:
                files[name] = text
    finally:
        _hung.clear()
    return files


def read_capture(path: str | os.PathLike) -> dict[str, str]:
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} is a file; --from takes the capture folder ({folder.parent})")
    if not folder.is_dir():
        raise FileNotFoundError(f"capture folder not found: {folder}")
    found: dict[str, str] = {}
    closed: list[str] = []
    for name in SOURCES:
        try:
            text = _capture_file(folder / name)
        except PermissionError:
            closed.append(name)
            continue
        if text is not None:
            found[name] = text
    if closed:
        # read as missing, an unreadable cgroup.txt gave facts without the CPU quota (and all unreadable, a
        # folder said to be no capture)
        raise PermissionError(
            f"cannot read {len(closed)} of the capture files in {folder} (permission denied): "
            f"{', '.join(closed)}; make them readable (chmod a+r) or read the capture as their owner"
        )
    if not found:
        raise ValueError(f"{folder} is not a capture folder: none of {', '.join(SOURCES)} is there")
    if not any(text.strip() for text in found.values()):
        raise ValueError(
            f"{folder} is not a capture: its {len(found)} capture files are all empty (commands that failed?)"
        )
    return found


# far above any real capture file (/proc/cpuinfo of an 8192-CPU host is about 12 MiB)
CAPTURE_FILE_MAX_BYTES = 64 << 20


def _capture_file(path: Path) -> str | None:
    """A capture file's text (UTF-8, universal newlines as before); None when it is not there (or is a
    folder). Bounded, and a FIFO or device is refused: `lscpu.txt -> /dev/zero` took all memory and a FIFO
    blocked forever. PermissionError is left to the caller."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # NONBLOCK: a FIFO opens at once
    except PermissionError:
        raise
    except OSError:
        return None  # missing, a dangling link or a loop
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            return None
        if not stat.S_ISREG(mode):
            raise ValueError(f"{path} is not a regular file (a FIFO, socket or device): not a capture file")
        chunks, left = [], CAPTURE_FILE_MAX_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > CAPTURE_FILE_MAX_BYTES:
        raise ValueError(f"{path} is over {CAPTURE_FILE_MAX_BYTES >> 20} MiB: not a capture file")
    return raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def write_capture(path: str | os.PathLike) -> list[Path]:
    """Write this host's capture into folder `path` (new, or empty); all or nothing.

    A new folder is staged next to it and renamed into place. An existing empty folder (also one `path` links
    to, or a mount point) is filled through a staging folder inside it, whose files are then moved up. Errors
    name `path` as given and say what is wrong with it; on any failure nothing is left behind, folders this
    call created on the way included.
    """
    target = Path(path)
    _refuse_planted_links(target)
    folder = _capture_folder(target)
    with _terminations_raise(), _ParentsMade() as made:
        try:
            made.create(folder.parent, target)
            files = collect_live()
            if folder.is_dir():
                _fill_empty_folder(folder, target, files)
            else:
                _write_new_folder(folder, target, files)
        except BaseException:
            made.remove()
            raise
    return [target / name for name in [*files, "README.md"]]


@contextlib.contextmanager
def _terminations_raise():
    """SIGTERM and SIGHUP (a closed SSH session) raise SystemExit(128 + signal) while the capture is made,
    as Ctrl-C raises KeyboardInterrupt, so that the cleanup runs: killed by them, a capture left the folders
    it had created on the way (the commands may run for a minute). A signal someone ignores (nohup) stays
    ignored; another handler stays in place."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(number: int, _frame) -> None:
        raise SystemExit(128 + number)

    previous = {}
    for number in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(number) is signal.SIG_DFL:
            previous[number] = signal.signal(number, stop)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _link_target(link: Path) -> Path:
    """The existing path `link` leads to; a sentence naming `link` when it loops or dangles."""
    try:
        return Path(os.path.realpath(link, strict=True))
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise LinkLoop(link) from None
        if error.errno == errno.ENOENT:
            where = os.path.realpath(link)
            raise FileNotFoundError(f"{link} is a link to {where}, which does not exist") from None
        raise _reworded(error, f"cannot follow the link {link}") from None


MAX_LINK_HOPS = 40  # the kernel's limit (ELOOP); a longer chain is left to the checks that follow


def _refuse_planted_links(target: Path) -> None:
    """Refuse a path that passes through a link someone else planted in a sticky world-writable folder.

    `/tmp/cap -> /etc/somewhere`, made by another user, turned a root `--capture /tmp/cap` into files written
    wherever that user chose: the capture follows links by resolving them itself (realpath), which the
    kernel's fs.protected_symlinks does not stop. The same rule as the kernel's is applied to every link on
    the way, before anything is written: in a folder with the sticky bit that anyone may write, only a link
    owned by this user or by the folder's owner is followed."""
    pending = list(Path(target).parts)
    try:
        current = Path.cwd() if not Path(target).is_absolute() else Path("/")
    except OSError as error:  # the current folder was deleted
        raise _reworded(error, f"cannot create {target} in the current folder") from None
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "/":
            current = Path("/")
            continue
        if part in ("", "."):
            continue
        if part == "..":
            current = current.parent
            continue
        candidate = current / part
        try:
            info = os.lstat(candidate)
        except OSError:
            return  # not there yet (made by the capture) or unreadable: later checks say which
        if not stat.S_ISLNK(info.st_mode):
            current = candidate
            continue
        hops += 1
        if hops > MAX_LINK_HOPS:
            return
        try:
            points_to = os.readlink(candidate)
        except OSError:
            return
        _refuse_if_planted(candidate, points_to, info, target)
        pending[:0] = Path(points_to).parts


def _refuse_if_planted(link: Path, points_to: str, info: os.stat_result, target: Path) -> None:
    try:
        folder = os.stat(link.parent)
    except OSError:
        return
    shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
    if shared and info.st_uid not in (os.geteuid(), folder.st_uid):
        shown = f"{target}: " if link != Path(target) else ""
        raise PermissionError(
            f"{shown}refusing to follow the link {link} (to {points_to}): it is owned by uid "
            f"{info.st_uid}, not by you or the owner of {link.parent}, which anyone may write to; someone "
            "else may have planted it there. Choose a path of your own (or remove the link)"
        )


def _capture_folder(target: Path) -> Path:
    """Where the capture goes: `target` or the folder it links to; raises if that cannot take a capture."""
    folder = target
    if target.is_symlink():
        folder = _link_target(target)
        if not folder.is_dir():
            raise NotADirectoryError(f"{target} is a link to {folder}, which is a file, not a directory")
    elif target.exists() and not target.is_dir():
        raise FileExistsError(f"{target} is a file, not a directory; choose a new directory")
    if folder.is_dir():
        try:
            used = any(folder.iterdir())
        except OSError as error:
            raise _reworded(error, f"cannot read {target}") from None
        if used:
            raise FileExistsError(f"{target} is not empty; choose a new or empty directory")
        _refuse_another_users(folder, target)
    else:
        # the capture's folders are made in the nearest one there is (the staging folder, missing parents)
        _refuse_another_users(next(p for p in folder.parents if p.is_dir()), target)
    return folder


def _refuse_another_users(folder: Path, target: Path) -> None:
    """A folder's owner may rename what is in it, also with the sticky bit: the staging folder (or a parent
    made for the capture) swapped for a link to /etc while the commands run, and the files went there (an
    empty /tmp/cap made by another user, or `--capture /home/eve/cap` as root). Only this user's folders and
    root's are written in, and under sudo the folders of the user who ran sudo that no one else may write
    in (`sudo ktinfra facts --capture cap` in one's own home: that user asked for the files there)."""
    info = os.stat(folder)
    if info.st_uid in (os.geteuid(), 0) or _sudo_users_own(info):
        return
    owner = info.st_uid
    what = f"{target} is" if folder == target else f"{target}: {folder} (where it is made) is"
    raise PermissionError(
        f"{what} owned by uid {owner}, not by you: its owner could swap what is written there for links; "
        "choose a new folder or an empty one of your own"
    )


def _sudo_users_own(info: os.stat_result) -> bool:
    """The folder is the sudo caller's (SUDO_UID, as root) and writable by its owner alone."""
    caller = os.environ.get("SUDO_UID", "")
    if os.geteuid() != 0 or not caller.isdigit():
        return False
    return info.st_uid == int(caller) and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _missing_parents(parent: Path) -> list[Path]:
    """The folders above the capture folder that are not there yet, innermost first."""
    missing: list[Path] = []
    for directory in [parent, *parent.parents]:
        if directory.is_dir():
            break
        if directory.is_symlink() and not directory.exists():
            _link_target(directory)  # raises: the link dangles or loops
        if directory.exists():
            raise NotADirectoryError(f"{directory} is a file, not a directory")
        missing.append(directory)
    return missing


_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@contextlib.contextmanager
def _signals_held():
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is done (in the main thread, where their handlers
    run): a folder made and its record are one step, so a stop never falls between them."""
    main = threading.current_thread() is threading.main_thread()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS) if main else None
    try:
        yield
    finally:
        if held is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


class _ParentsMade:
    """The missing folders above the capture folder, made through their open parents. After a failure each
    one this capture made is removed while its name, in that same parent, still leads to that very folder
    (by device and inode) and it is empty: one that was there before, appeared meanwhile (another capture
    making the same parents) or was put there by someone else is never removed."""

    def __init__(self) -> None:
        self._fds: list[int] = []  # every folder opened on the way, closed at the end
        # (the parent's fd, name, st_dev, st_ino) of each folder made, outermost first
        self._made: list[tuple[int, str, int, int]] = []

    def __enter__(self) -> _ParentsMade:
        return self

    def __exit__(self, *_exc) -> None:
        for fd in self._fds:
            os.close(fd)

    def create(self, parent: Path, target: Path) -> None:
        missing = _missing_parents(parent)
        if not missing:
            return
        directory = missing[-1]
        try:
            self._fds.append(os.open(directory.parent, os.O_RDONLY | os.O_DIRECTORY))
            for directory in reversed(missing):
                self._make(self._fds[-1], directory, target)
        except OSError as error:
            raise _reworded(error, f"cannot create {directory} for {target}") from None

    def _make(self, parent_fd: int, directory: Path, target: Path) -> None:
        name = directory.name
        with _signals_held():
            try:
                os.mkdir(name, dir_fd=parent_fd)
                ours = True
            except FileExistsError:  # made meanwhile by someone else: kept, and checked as the others were
                ours = False
            info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            if ours:
                self._made.append((parent_fd, name, info.st_dev, info.st_ino))
        if not ours:
            if not stat.S_ISDIR(info.st_mode):
                raise FileExistsError(errno.EEXIST, "it appeared meanwhile and is no folder")
            _refuse_another_users(directory, target)
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
        self._fds.append(fd)
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            raise FileExistsError(errno.EEXIST, "it was replaced while it was made")

    def remove(self) -> None:
        for parent_fd, name, dev, ino in reversed(self._made):
            with contextlib.suppress(OSError):
                info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
                if (info.st_dev, info.st_ino) == (dev, ino):
                    os.rmdir(name, dir_fd=parent_fd)
        self._made.clear()


def _reworded(error: OSError, what: str, staging: Path | None = None, shown: Path | None = None) -> OSError:
    """The same kind of error, naming the user's path instead of a staging path nobody asked for."""
    reason = error.strerror or str(error)
    if staging is not None and shown is not None and error.filename:
        inside = os.path.relpath(error.filename, staging)
        if inside != "." and not inside.startswith(".."):
            what = f"{what} ({shown / inside})"
    return type(error)(f"{what}: {reason}")


def _write_files(held: int, staging: Path, files: dict[str, str]) -> None:
    """Create the capture files (and its README) in the open staging folder `held`, which is `staging`."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    readme = (
        f"Captured by `ktinfra facts --capture` (ktinfra {__version__}) on {stamp};\n"
        "commands that were missing on the host are absent.\n"
        "Read it back with `ktinfra facts --from DIR`.\n"
    )
    for name, text in {**files, "README.md": readme}.items():
        _write_new_file(held, name, staging, text)


# a new file only, never through a link: a name that is taken by the time it is opened (a link planted
# after the checks included) is refused, and what the link points to is not touched
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _appeared(staged: Path) -> FileExistsError:
    """A capture file's name was taken after the checks (in the staging folder or where the file is moved).
    `staged` is the file's staging path, which _reworded shows as the user's path."""
    return FileExistsError(errno.EEXIST, "appeared while the capture was written", str(staged))


def _write_new_file(folder: int, name: str, staging: Path, text: str) -> None:
    """Create `name` in the open folder `folder` (which is `staging`) holding `text`, mode 0644."""
    data, path = memoryview(text.encode("utf-8")), staging / name
    try:
        fd = os.open(name, NEW_FILE_FLAGS, 0o644, dir_fd=folder)
    except FileExistsError:
        raise _appeared(path) from None
    except OSError as error:
        raise type(error)(error.errno, error.strerror, str(path)) from None
    try:
        os.fchmod(fd, 0o644)  # a capture is meant to be shared, also when written under umask 077
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


@contextlib.contextmanager
def _staging_folder(parent: int, parent_path: Path, prefix: str, failed: str):
    """A new private folder in `parent_path` (open as `parent`): (its path, the folder held open). `failed`
    begins the error when it cannot be made.

    Whoever may write in `parent_path` (the sudo caller, in a root capture) can swap the staging folder for
    a link to any folder once it exists. Everything the capture does to it after it is made goes through
    the open folder (writes, fchmod, the listing, moves out of it and removals), and a step that can only
    go by name (a rename, the final rmdir) is taken only while the name still leads to it (_still_ours).
    On any failure the capture's own files in it are removed through the open folder, and the folder too
    while its name still leads to it."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=prefix, dir=parent_path))
    except OSError as error:
        raise _reworded(error, failed) from None
    try:
        held = os.open(staging.name, FOLDER_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)  # rmtree refuses a link in its place
        if isinstance(error, OSError):
            raise _reworded(error, failed) from None
        raise
    try:
        yield staging, held
    except BaseException:
        for name in _listing(held):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=held)
        with contextlib.suppress(OSError):
            _still_ours(parent, staging, held)
            os.rmdir(staging.name, dir_fd=parent)
        raise
    finally:
        os.close(held)


def _listing(held: int) -> list[str]:
    try:
        return sorted(os.listdir(held))
    except OSError:
        return []


def _still_ours(parent: int, staging: Path, held: int) -> None:
    """Raise unless the name of the staging folder in `parent` still leads to the folder held open."""
    mine = os.fstat(held)
    try:
        now = os.stat(staging.name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        now = None
    if now is None or (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
        raise OSError(
            errno.EBUSY,
            "its staging folder was replaced while the capture was written (by whoever else may write in "
            f"{staging.parent}); nothing was put in place",
        )


def _write_new_folder(folder: Path, target: Path, files: dict[str, str]) -> None:
    """Stage next to `folder`, then rename the staging folder into place."""
    try:
        parent = os.open(folder.parent, FOLDER_FLAGS)
    except OSError as error:
        raise _reworded(error, f"cannot create {target}") from None
    try:
        staged = _staging_folder(parent, folder.parent, f".{folder.name}.", f"cannot create {target}")
        with staged as (staging, held):
            try:
                _write_files(held, staging, files)
                os.fchmod(held, 0o755)  # mkdtemp makes it private; a capture is meant to be shared
                _still_ours(parent, staging, held)
                # rename(2) goes by name: the check above leaves the shortest window there is; the new
                # name is never taken over (an empty folder made there meanwhile was, by rename(2))
                _rename_into_place(parent, staging.name, folder)
            except OSError as error:
                raise _reworded(error, f"cannot write {target}", staging, target) from None
    finally:
        os.close(parent)


def _rename_into_place(parent: int, staged: str, folder: Path) -> None:
    try:
        rename_no_replace(parent, staged, folder.name)
    except FileExistsError:
        raise FileExistsError(
            errno.EEXIST,
            f"{folder.name} appeared in {folder.parent} while the capture was written; it was left as it is "
            "and nothing was put in place",
        ) from None


def _fill_empty_folder(folder: Path, target: Path, files: dict[str, str]) -> None:
    """Stage inside the empty `folder` (maybe a mount point or a link's target), then move the files up."""
    try:
        home = os.open(folder, FOLDER_FLAGS)
    except OSError as error:
        raise _reworded(error, f"cannot write into {target}") from None
    moved: list[str] = []
    try:
        staged = _staging_folder(home, folder, ".capture.", f"cannot write into {target}")
        with staged as (staging, held):
            try:
                _write_files(held, staging, files)
                _still_ours(home, staging, held)
                for name in _listing(held):
                    _move_no_replace(held, home, name, staging)
                    moved.append(name)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=held)  # the staging name of a file moved by link(2)
                _still_ours(home, staging, held)
                os.rmdir(staging.name, dir_fd=home)
            except BaseException as error:
                for name in moved:
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=home)
                if isinstance(error, OSError):  # also EFBIG/ENOSPC from a write, which carry no file name
                    raise _reworded(error, f"cannot write into {target}", staging, target) from None
                raise
    finally:
        os.close(home)


def _move_no_replace(held: int, home: int, name: str, staging: Path) -> None:
    """Move `name` from the open staging folder `held` (which is `staging`) into the open folder `home`
    unless something is there, also something that appears meanwhile: link(2) refuses a name that is taken
    (a link included, which it neither follows nor replaces) where rename(2) replaced it. A filesystem
    without hard links (vfat, some FUSE) gets the check, then the rename."""
    try:
        os.link(name, name, src_dir_fd=held, dst_dir_fd=home, follow_symlinks=False)
        return
    except FileExistsError:
        raise _appeared(staging / name) from None
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV):
            raise type(error)(error.errno, error.strerror, str(staging / name)) from None
    try:
        os.stat(name, dir_fd=home, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(name, name, src_dir_fd=held, dst_dir_fd=home)
        return
    raise _appeared(staging / name)
