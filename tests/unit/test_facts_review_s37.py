"""Review session 37 of `ktinfra facts`: input shapes the parser read wrongly before."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ktinfra import facts as host_facts
from ktinfra.facts import capture as capture_module
from ktinfra.facts import from_capture
from ktinfra.facts.capture import _cgroup_limits

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"

# `df -B1 --output=source,fstype,size,used,avail,target` (GNU coreutils 9.1) on the development VM, with a
# tmpfs mounted as `mount -t tmpfs "my src" "/tmp/s37 a b"`: df prints the source and the target as they are.
DF_REAL_SPACES = """\
Filesystem              Type        1B-blocks        Used       Avail Mounted on
/dev/vda                ext4     270553174016 25319325696 83624968192 /
my src                  tmpfs     12638031872           0 12638031872 /tmp/s37 a b
tmpfs                   tmpfs     25276063744           0 25276063744 /dev/shm
"""


def _capture(tmp_path: Path, **files: str) -> Path:
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / "epyc-2c-nogpu", capture)
    for name, text in files.items():
        (capture / name.replace("_", "-").replace("-txt", ".txt")).write_text(text)
    return capture


def test_a_source_with_spaces_keeps_its_df_row(tmp_path):
    """Before: df rows were split on whitespace, so a row whose source has a space (a CIFS share
    `//nas/model store`, an sshfs `user@host:/my models`) had a word where the numbers belong and was
    dropped: the model disk was missing from `disks`."""
    df = DF_REAL_SPACES + (
        "//nas/model store       cifs    4000000000000 1000000000000 3000000000000 /mnt/model store\n"
        "me@nas:/my models       fuse.sshfs 2000000000000 0 2000000000000 /srv/ssh models\n"
    )
    facts = from_capture(_capture(tmp_path, df_txt=df))
    disks = {disk["mount"]: disk for disk in facts["disks"]}
    assert sorted(disks) == ["/", "/mnt/model store", "/srv/ssh models"]
    assert disks["/mnt/model store"]["source"] == "//nas/model store"
    assert disks["/mnt/model store"]["fstype"] == "cifs"
    assert disks["/mnt/model store"]["avail_bytes"] == 3_000_000_000_000
    assert disks["/srv/ssh models"]["source"] == "me@nas:/my models"
    assert disks["/"]["avail_bytes"] == 83624968192
    assert facts["shm_bytes"] == 25276063744


def test_df_rows_that_are_not_rows_are_still_skipped(tmp_path):
    df = (
        "Filesystem Type 1B-blocks Used Avail Mounted on\n"
        "/dev/vda ext4 1000 400 -20 /\n"  # GNU df's negative Avail: nothing free
        "/dev/vdb ext4 - - - /nosize\n"  # df could not read the sizes
        "/dev/vdc ext4 1000 400\n"  # cut short
        "/dev/vdd ext4 1000 400 600 /trailing space \n"
    )
    disks = {disk["mount"]: disk for disk in from_capture(_capture(tmp_path, df_txt=df))["disks"]}
    assert sorted(disks) == ["/", "/trailing space "]
    assert disks["/"]["avail_bytes"] == 0


def test_a_development_glibc_is_its_major_minor(tmp_path):
    """Before: `ldd (GNU libc) 2.40.9000` (a Fedora Rawhide development build) was read as glibc "40.9000"."""
    facts = from_capture(_capture(tmp_path, ldd_txt="ldd (GNU libc) 2.40.9000\nCopyright (C) 2024\n"))
    assert (facts["os"]["glibc"], facts["os"]["glibc_source"]) == ("2.40", "ldd")
    facts = from_capture(_capture(tmp_path / "b", ldd_txt="ldd (Ubuntu GLIBC 2.39-0ubuntu8.3) 2.39\n"))
    assert facts["os"]["glibc"] == "2.39"


# GNU df with a dead FUSE mount (an sshfs or rclone whose daemon died; seen here with a /dev/fuse mount whose
# fd was closed): every other filesystem on stdout, "df: /tmp/s37dead: Transport endpoint is not connected"
# on stderr, exit status 1. The stand-in runs the real df and fails the same way.
DF_WITH_A_DEAD_MOUNT = """#!/bin/sh
/bin/df "$@"
echo "df: /mnt/rclone: Transport endpoint is not connected" >&2
exit 1
"""


def test_df_failing_on_one_dead_mount_keeps_the_others(tmp_path, monkeypatch):
    """Before: df's exit status 1 threw its whole output away, so one dead FUSE mount or stale NFS handle
    left the live facts (and a capture) without any disk and without /dev/shm."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "df").write_text(DF_WITH_A_DEAD_MOUNT)
    (bindir / "df").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    assert subprocess.run(["df", "-B1"], capture_output=True, check=False).returncode == 1
    real = [
        line.split()[-1]
        for line in subprocess.run(
            ["/bin/df", "--output=target"], capture_output=True, text=True, check=False
        ).stdout.splitlines()[1:]
    ]

    live = host_facts.gather_live()
    root = next(disk for disk in live["disks"] if disk["mount"] == "/")
    assert root["size_bytes"] == shutil.disk_usage("/").total
    assert {disk["mount"] for disk in live["disks"]} <= set(real)
    if "/dev/shm" in real:
        assert live["shm_bytes"] == shutil.disk_usage("/dev/shm").total

    written = host_facts.write_capture(tmp_path / "cap")
    assert tmp_path / "cap" / "df.txt" in written
    back = host_facts.from_capture(tmp_path / "cap")
    assert [disk["mount"] for disk in back["disks"]] == [disk["mount"] for disk in live["disks"]]
    assert back["shm_bytes"] == live["shm_bytes"]


# cgroup.txt that `write_capture` wrote inside `docker run --cgroup-parent=/s37p` on this cgroup v1 host, with
# memory.limit_in_bytes 209715200 (200 MiB) set on /s37p and none on the container: docker mounts the
# container's own cgroup as /sys/fs/cgroup/memory, so /s37p's limit shows only in memory.stat.
CGROUP_UNDER_A_LIMITED_PARENT = """\
/sys/fs/cgroup/memory/memory.limit_in_bytes: 9223372036854771712
/sys/fs/cgroup/memory/memory.usage_in_bytes: 10772480
/sys/fs/cgroup/memory/memory.stat: hierarchical_memory_limit 209715200
/sys/fs/cgroup/cpuset/cpuset.cpus: 0-1
/sys/fs/cgroup/cpu/cpu.cfs_quota_us: -1
/sys/fs/cgroup/cpu/cpu.cfs_period_us: 100000
"""


def test_a_v1_memory_limit_above_the_container_is_read_from_memory_stat(tmp_path):
    """Before: only memory.limit_in_bytes was read, so a limit on the container's parent cgroup (docker
    --cgroup-parent, a platform's per-user slice) was invisible and memory.total_bytes was the host's
    24 GiB MemTotal instead of the 200 MiB the container may use."""
    facts = from_capture(_capture(tmp_path, cgroup_txt=CGROUP_UNDER_A_LIMITED_PARENT))
    memory = facts["memory"]
    assert memory["cgroup_limit_bytes"] == memory["total_bytes"] == 200 * 2**20
    assert memory["available_bytes"] == 200 * 2**20 - 10772480
    # the unlimited value of v1 (PAGE_COUNTER_MAX pages) is no limit, as in memory.limit_in_bytes
    unlimited = CGROUP_UNDER_A_LIMITED_PARENT.replace("limit 209715200", "limit 9223372036854771712")
    facts = from_capture(_capture(tmp_path / "b", cgroup_txt=unlimited))
    assert facts["memory"]["cgroup_limit_bytes"] is None


def test_the_live_capture_keeps_memory_stats_hierarchical_limit():
    """On this cgroup v1 host: cgroup.txt holds each memory cgroup's hierarchical_memory_limit line."""
    root = Path("/sys/fs/cgroup/memory/memory.stat")
    if not root.is_file():  # a cgroup v2 host has no such line; nothing to compare
        assert "hierarchical_memory_limit" not in (_cgroup_limits() or "")
        return
    text = _cgroup_limits()
    expected = next(ln for ln in root.read_text().splitlines() if ln.startswith("hierarchical_memory_limit "))
    assert f"{root}: {expected}" in text.splitlines()


@pytest.mark.parametrize("value", ["1²", "²", "٣", "1" * 5000, "0,²"])
def test_a_cuda_visible_devices_entry_that_is_no_ascii_index_ends_the_list(tmp_path, value):
    """Before: str.isdigit() took "²" and "٣" for indices, and int() then raised (or read "٣" as GPU 3), as it
    did on 5000 digits: `ktinfra facts --from` printed "error: invalid literal for int()" and exited 1. As in
    CUDA, an entry that names no GPU ends the list: the GPUs before it are kept."""
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / "2xh200-xeon-amx-32c", capture)
    (capture / "cuda-visible-devices.txt").write_text(value + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "ktinfra", "facts", "--from", str(capture), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    kept = [0] if value.startswith("0,") else []
    assert [gpu["index"] for gpu in facts["gpus"]] == kept
    assert facts["cuda_visible_devices"]["hidden_indices"] == [i for i in (0, 1) if i not in kept]


# df on a host with a hard NFS mount whose server is gone: statfs blocks, df never returns; `df -l` skips
# network filesystems and answers. The stand-in hangs unless asked with -l, then runs the real df.
DF_HANGING_ON_A_NETWORK_MOUNT = """#!/bin/sh
echo "$*" >> "$DF_LOG"
case " $* " in *" -l "*) exec /bin/df "$@";; esac
exec sleep 20
"""


def test_a_hung_df_is_asked_again_for_the_local_filesystems(tmp_path, monkeypatch):
    """Before: df timed out and the capture had no df.txt, so a dead NFS server cost every disk and
    /dev/shm. Now `df -l` is asked once more: the local disks are kept."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "df").write_text(DF_HANGING_ON_A_NETWORK_MOUNT)
    (bindir / "df").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("DF_LOG", str(tmp_path / "df.log"))
    monkeypatch.setattr(capture_module, "COMMAND_TIMEOUT_S", 1.0)

    files = capture_module.collect_live()
    calls = (tmp_path / "df.log").read_text().splitlines()
    assert calls == [
        "-B1 --output=source,fstype,size,used,avail,target",
        "-B1 --output=source,fstype,size,used,avail,target -l",
    ]
    facts = host_facts.parse_files(files, "live")
    root = next(disk for disk in facts["disks"] if disk["mount"] == "/")
    assert root["size_bytes"] == shutil.disk_usage("/").total
    if Path("/dev/shm").is_mount():
        assert facts["shm_bytes"] == shutil.disk_usage("/dev/shm").total
