"""The capture's cgroup.txt on cgroup v1 hosts whose hierarchies are not one controller per folder at
/sys/fs/cgroup/<controller>: it found a hierarchy by controller name only (/sys/fs/cgroup/cpu), so
"cpu,cpuacct" mounted at /sys/fs/cgroup/cpu,cpuacct without a cpu link, or a hierarchy mounted elsewhere,
lost the CPU quota; and it joined the process's full cgroup path (/docker/abc/inner) to a container's mount,
whose root is already /docker/abc, so the limit of the process's own cgroup below that root was never read.

SYNTHETIC inputs (no machine was captured): each test writes a fake root in tmp_path holding
proc/self/cgroup, proc/self/mountinfo (in the kernel's formats, proc(5)) and the cgroup folders with their
control files. The capture reads them there because `Path` in the capture module is replaced by one that
puts absolute paths under that root (it reads /proc and /sys through it alone).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktinfra.facts import capture as capture_module
from ktinfra.facts.cgroup import parse_cgroup

GIB = 1 << 30
UNLIMITED = "9223372036854771712"


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    fake = tmp_path / "root"
    fake.mkdir()

    def rebased(*parts) -> Path:
        path = Path(*parts)
        if path.is_absolute() and not path.is_relative_to(fake):
            return fake.joinpath(*path.parts[1:])
        return path

    monkeypatch.setattr(capture_module, "Path", rebased)
    return fake


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _mountinfo(*mounts: tuple[str, str, str, str]) -> str:
    """mountinfo lines of (root, mount point, fstype, super options), under a tmpfs /sys/fs/cgroup."""
    lines = ["25 24 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755"]
    for number, (root, point, fstype, options) in enumerate(mounts, start=26):
        lines.append(f"{number} 25 0:{number} {root} {point} rw,nosuid,relatime - {fstype} cgroup {options}")
    return "\n".join(lines) + "\n"


def _limits(root: Path):
    text = capture_module._cgroup_limits()
    assert text is None or all(line.startswith(str(root)) for line in text.splitlines())
    return parse_cgroup(text)


def test_combined_cpu_cpuacct_without_a_cpu_link_in_a_docker_container(root):
    """docker on cgroup v1: the container's own cgroup (/docker/abc) is each hierarchy's mount root."""
    _write(
        root,
        {
            "/proc/self/cgroup": (
                "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n"
            ),
            "/proc/self/mountinfo": _mountinfo(
                ("/docker/abc", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct"),
                ("/docker/abc", "/sys/fs/cgroup/memory", "cgroup", "rw,memory"),
                ("/docker/abc", "/sys/fs/cgroup/systemd", "cgroup", "rw,xattr,name=systemd"),
            ),
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "400000\n",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes": f"{16 * GIB}\n",
        },
    )
    limits = _limits(root)
    assert limits.quota_cpus == 4.0
    assert limits.memory_limit_bytes == 16 * GIB


def test_the_own_cgroup_below_the_mount_root_is_read_not_only_the_root(root):
    """systemd in a v1 container puts the process in /docker/abc/system.slice/app.service; the mount's root
    is /docker/abc, so its folder is <mount>/system.slice/app.service (cpu is a link to cpu,cpuacct)."""
    own = "/docker/abc/system.slice/app.service"
    _write(
        root,
        {
            "/proc/self/cgroup": f"9:memory:{own}\n3:cpu,cpuacct:{own}\n2:cpuset:{own}\n",
            "/proc/self/mountinfo": _mountinfo(
                ("/docker/abc", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct"),
                ("/docker/abc", "/sys/fs/cgroup/cpuset", "cgroup", "rw,cpuset"),
                ("/docker/abc", "/sys/fs/cgroup/memory", "cgroup", "rw,memory"),
            ),
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
            "/sys/fs/cgroup/cpu,cpuacct/system.slice/app.service/cpu.cfs_quota_us": "250000\n",
            "/sys/fs/cgroup/cpu,cpuacct/system.slice/app.service/cpu.cfs_period_us": "100000\n",
            "/sys/fs/cgroup/cpuset/cpuset.cpus": "0-15\n",
            "/sys/fs/cgroup/cpuset/system.slice/app.service/cpuset.cpus": "4-7\n",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes": UNLIMITED + "\n",
            "/sys/fs/cgroup/memory/system.slice/app.service/memory.limit_in_bytes": f"{8 * GIB}\n",
        },
    )
    (root / "sys/fs/cgroup/cpu").symlink_to("cpu,cpuacct")
    limits = _limits(root)
    assert limits.quota_cpus == 2.5
    assert limits.cpuset == {4, 5, 6, 7}
    assert limits.memory_limit_bytes == 8 * GIB


def test_a_hierarchy_mounted_outside_sys_fs_cgroup(root):
    """Old hosts (RHEL 6's cgconfig) mounted the hierarchies at /cgroup/<name>; a path with a space comes
    escaped (\\040) in mountinfo."""
    _write(
        root,
        {
            "/proc/self/cgroup": "3:cpuacct,cpu:/jobs/run 1\n",
            "/proc/self/mountinfo": _mountinfo(
                ("/", "/cgroup/cpu\\040and\\040acct", "cgroup", "rw,cpuacct,cpu")
            ),
            "/cgroup/cpu and acct/cpu.cfs_quota_us": "-1\n",
            "/cgroup/cpu and acct/jobs/cpu.cfs_quota_us": "800000\n",
            "/cgroup/cpu and acct/jobs/run 1/cpu.cfs_quota_us": "300000\n",
            "/cgroup/cpu and acct/jobs/run 1/cpu.cfs_period_us": "100000\n",
            "/cgroup/cpu and acct/other/cpu.cfs_quota_us": "50000\n",  # a sibling: not this process's
        },
    )
    assert _limits(root).quota_cpus == 3.0


def test_a_host_with_the_usual_link_still_reads_its_own_cgroup_and_ancestors(root):
    """The common v1 host layout (mount roots "/", cpu -> cpu,cpuacct) keeps working."""
    _write(
        root,
        {
            "/proc/self/cgroup": "4:cpu,cpuacct:/user.slice/job\n",
            "/proc/self/mountinfo": _mountinfo(
                ("/", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct")
            ),
            "/sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.cfs_quota_us": "600000\n",
            "/sys/fs/cgroup/cpu,cpuacct/user.slice/job/cpu.cfs_quota_us": "-1\n",
        },
    )
    (root / "sys/fs/cgroup/cpu").symlink_to("cpu,cpuacct")
    assert _limits(root).quota_cpus == 6.0


def test_a_cgroup_v2_host_keeps_working(root):
    _write(
        root,
        {
            "/proc/self/cgroup": "0::/user.slice/job\n",
            "/proc/self/mountinfo": _mountinfo(("/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate")),
            "/sys/fs/cgroup/cgroup.controllers": "cpuset cpu memory\n",
            "/sys/fs/cgroup/user.slice/cpu.max": "150000 100000\n",
            "/sys/fs/cgroup/user.slice/job/memory.max": f"{4 * GIB}\n",
        },
    )
    limits = _limits(root)
    assert (limits.quota_cpus, limits.memory_limit_bytes) == (1.5, 4 * GIB)


def test_without_mountinfo_the_combined_folder_under_sys_fs_cgroup_is_guessed(root):
    """No /proc/self/mountinfo to read (a sandbox that hides it): the hierarchy "cpu,cpuacct" is looked for
    at /sys/fs/cgroup/cpu,cpuacct, then at /sys/fs/cgroup/cpu, with mount roots taken as "/"."""
    _write(
        root,
        {
            "/proc/self/cgroup": "4:cpu,cpuacct:/job\n",
            "/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us": "200000\n",
            "/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us": "100000\n",
        },
    )
    assert _limits(root).quota_cpus == 2.0
