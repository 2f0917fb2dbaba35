"""A cgroup whose path holds ':' lost its limits. /proc/self/cgroup lines are "hierarchy-ID:controllers:path"
and the path may itself contain ':' (systemd unit names allow it: a v2 line "0::/jobs/run:1", a v1 line
"4:cpu,cpuacct:/jobs/run:1"). The capture splits those lines right (at the first two colons) and writes
cgroup.txt as "<control file path>: <value>" lines, but parse_cgroup split each of those at its first ':',
so "/sys/fs/cgroup/jobs/run:1/cpu.max: 250000 100000" was read as the file "/sys/fs/cgroup/jobs/run" with the
value "1/cpu.max: ...": the quota and the memory limit of that cgroup were not seen (quota_cpus None).

SYNTHETIC inputs (no host with such a cgroup was captured): a fake root under tmp_path holding
proc/self/cgroup, proc/self/mountinfo (kernel formats, proc(5)) and the control files, read by the capture's
own code, as in test_facts_cgroup_v1_mounts.py; and a cgroup.txt in the capture's line format.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktinfra.facts import capture as capture_module
from ktinfra.facts import from_capture
from ktinfra.facts.cgroup import parse_cgroup

GIB = 1 << 30


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


def _mount(root: str, point: str, fstype: str, options: str) -> str:
    return (
        "25 24 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755\n"
        f"26 25 0:26 {root} {point} rw,nosuid,relatime - {fstype} cgroup {options}\n"
    )


def test_a_v2_cgroup_path_with_colons_keeps_its_limits(root):
    _write(
        root,
        {
            "/proc/self/cgroup": "0::/jobs/run:1\n",
            "/proc/self/mountinfo": _mount("/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate"),
            "/sys/fs/cgroup/jobs/run:1/cpu.max": "250000 100000\n",
            "/sys/fs/cgroup/jobs/run:1/memory.max": f"{6 * GIB}\n",
            "/sys/fs/cgroup/jobs/run:1/cpuset.cpus.effective": "2-5\n",
        },
    )
    text = capture_module._cgroup_limits()
    assert f"{root}/sys/fs/cgroup/jobs/run:1/cpu.max: 250000 100000" in text.splitlines()
    limits = parse_cgroup(text)
    assert (limits.quota_cpus, limits.memory_limit_bytes, limits.cpuset) == (2.5, 6 * GIB, {2, 3, 4, 5})


def test_a_v1_cgroup_path_with_colons_keeps_its_limits(root):
    _write(
        root,
        {
            "/proc/self/cgroup": "4:cpu,cpuacct:/jobs/a:b:c\n9:memory:/jobs/a:b:c\n",
            "/proc/self/mountinfo": _mount("/", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct")
            + "27 25 0:27 / /sys/fs/cgroup/memory rw,nosuid,relatime - cgroup cgroup rw,memory\n",
            "/sys/fs/cgroup/cpu,cpuacct/jobs/a:b:c/cpu.cfs_quota_us": "300000\n",
            "/sys/fs/cgroup/cpu,cpuacct/jobs/a:b:c/cpu.cfs_period_us": "100000\n",
            "/sys/fs/cgroup/memory/jobs/a:b:c/memory.limit_in_bytes": f"{3 * GIB}\n",
            "/sys/fs/cgroup/memory/jobs/a:b:c/memory.usage_in_bytes": f"{GIB}\n",
        },
    )
    limits = parse_cgroup(capture_module._cgroup_limits())
    assert (limits.quota_cpus, limits.memory_limit_bytes, limits.memory_free_bytes) == (3.0, 3 * GIB, 2 * GIB)


def test_a_capture_folder_with_a_colon_cgroup_reads_its_quota(tmp_path):
    """cgroup.txt as the capture writes it (also a ': ' inside a folder name), read through from_capture."""
    capture = tmp_path / "cap"
    capture.mkdir()
    (capture / "nproc.txt").write_text("16\n")
    (capture / "cgroup.txt").write_text(
        "/sys/fs/cgroup/cpuset.cpus.effective: 0-15\n"
        "/sys/fs/cgroup/svc:web: x/cpu.max: 400000 100000\n"
        "/sys/fs/cgroup/svc:web: x/memory.max: 17179869184\n"
        "/sys/fs/cgroup/svc:web: x/memory.stat: hierarchical_memory_limit 8589934592\n"
    )
    facts = from_capture(capture)
    assert facts["cpu"]["quota_cpus"] == 4.0
    assert facts["memory"]["cgroup_limit_bytes"] == 8 * GIB
