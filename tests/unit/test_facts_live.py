"""`gather_live`, `write_capture` and `ktinfra facts` on this very machine, checked against /proc and /sys."""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import facts as host_facts
from ktinfra.cli import app
from ktinfra.facts import capture as capture_module
from ktinfra.facts.cpulist import format_cpulist, parse_cpulist

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
STABLE = ("cpu", "gpus", "nvidia", "container", "container_evidence", "init", "os", "shm_bytes", "tuning")


@pytest.fixture(scope="module")
def live() -> dict:
    return host_facts.gather_live()


def _sysfs_cpulist(path: str) -> set[int]:
    return parse_cpulist(Path(path).read_text()) or set()


def test_live_cpus_agree_with_the_kernel(live):
    affinity = os.sched_getaffinity(0)
    cpu = live["cpu"]
    assert cpu["usable_cpus"] == format_cpulist(affinity)
    siblings = {
        frozenset(_sysfs_cpulist(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"))
        for c in affinity
    }
    cores = {group & affinity for group in siblings}
    quota = cpu["quota_cpus"]
    if quota is None:
        assert cpu["logical_cpus"] == len(affinity)
        assert cpu["physical_cores"] == len(cores)
    else:
        assert cpu["logical_cpus"] == min(len(affinity), max(1, math.floor(quota)))
    nodes = [
        p
        for p in Path("/sys/devices/system/node").glob("node[0-9]*")
        if _sysfs_cpulist(str(p / "cpulist")) & affinity
    ]
    assert cpu["numa_nodes"] == (len(nodes) or 1)
    flags = next(
        line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")
    ).split()
    assert cpu["isa"]["avx2"] is ("avx2" in flags)
    assert cpu["isa"]["amx_tile"] is ("amx_tile" in flags)
    assert cpu["isa"]["avx512f"] is ("avx512f" in flags)


def test_live_memory_os_and_init_agree_with_the_kernel(live):
    assert live["memory"]["meminfo_total_bytes"] == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert live["memory"]["total_bytes"] <= live["memory"]["meminfo_total_bytes"]
    assert live["os"]["kernel"] == os.uname().release
    assert live["os"]["glibc"] == platform.libc_ver()[1]
    assert live["os"]["glibc_source"] == "ldd"
    assert live["init"] == Path("/proc/1/comm").read_text().strip()
    root = next(d for d in live["disks"] if d["mount"] == "/")
    usage = shutil.disk_usage("/")
    assert root["size_bytes"] == usage.total
    assert abs(root["avail_bytes"] - usage.free) < 2**30
    if shutil.which("nvidia-smi") is None:
        assert live["gpus"] == [] and live["nvidia"] == {"driver_version": None, "cuda_version": None}


def test_capture_then_from_round_trip(tmp_path, live):
    written = host_facts.write_capture(tmp_path / "cap")
    names = {p.name for p in written}
    assert {
        "lscpu.txt",
        "lscpu-p.txt",
        "cpuinfo.txt",
        "meminfo.txt",
        "cgroup.txt",
        "pid1.txt",
        "df.txt",
    } <= names
    assert all(p.is_file() for p in written)
    back = host_facts.from_capture(tmp_path / "cap")
    assert back["source"] == str(tmp_path / "cap")
    assert {k: back[k] for k in STABLE} == {k: live[k] for k in STABLE}
    assert back["memory"]["total_bytes"] == live["memory"]["total_bytes"]


def test_capture_refuses_a_used_folder_and_leaves_nothing_behind(tmp_path, monkeypatch):
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine\n")
    with pytest.raises(FileExistsError):
        host_facts.write_capture(used)
    assert [p.name for p in used.iterdir()] == ["notes.txt"]

    monkeypatch.setattr(
        capture_module, "collect_live", lambda: {"lscpu.txt": "x\n", "no/such/dir.txt": "y\n"}
    )
    with pytest.raises(FileNotFoundError, match=f"cannot write {tmp_path / 'broken'} "):
        host_facts.write_capture(tmp_path / "broken")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["used"]


def test_failed_capture_names_the_users_path_and_removes_what_it_created(tmp_path, monkeypatch):
    monkeypatch.setattr(
        capture_module, "collect_live", lambda: {"lscpu.txt": "x\n", "no/such/dir.txt": "y\n"}
    )
    target = tmp_path / "new" / "deeper" / "cap"
    with pytest.raises(FileNotFoundError) as raised:
        host_facts.write_capture(target)
    assert str(raised.value) == f"cannot write {target} ({target}/no/such/dir.txt): No such file or directory"
    assert list(tmp_path.iterdir()) == []  # new/deeper was made for the capture and went with it

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=f"cannot write into {empty} "):
        host_facts.write_capture(empty)
    assert list(empty.iterdir()) == []


def test_a_full_disk_while_filling_an_empty_folder_names_the_folder(tmp_path, monkeypatch):
    """EFBIG / ENOSPC come from write() without a file name: the error still names the user's folder."""
    import errno

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    monkeypatch.setattr(capture_module, "_write_files", full)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(OSError) as raised:
        host_facts.write_capture(empty)
    assert str(raised.value) == f"cannot write into {empty}: No space left on device"
    assert list(empty.iterdir()) == []


def test_capture_where_no_folder_can_be_made_names_the_users_path(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    with pytest.raises(OSError) as raised:
        host_facts.write_capture("/proc/ktinfra-capture-test")
    message = str(raised.value)
    assert message.startswith("cannot create /proc/ktinfra-capture-test: ")
    assert "/proc/." not in message and "Errno" not in message


def test_capture_below_a_file_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    (tmp_path / "afile").write_text("mine\n")
    with pytest.raises(NotADirectoryError) as raised:
        host_facts.write_capture(tmp_path / "afile" / "sub" / "cap")
    assert str(raised.value) == f"{tmp_path / 'afile'} is a file, not a directory"
    with pytest.raises(FileExistsError, match="is a file, not a directory"):
        host_facts.write_capture(tmp_path / "afile")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert (tmp_path / "afile").read_text() == "mine\n"


def test_capture_through_a_link_fills_the_empty_folder_it_points_to(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    written = host_facts.write_capture(tmp_path / "link")
    assert written == [tmp_path / "link" / "lscpu.txt", tmp_path / "link" / "README.md"]
    assert (tmp_path / "link").is_symlink()
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["README.md", "lscpu.txt"]
    with pytest.raises(FileExistsError, match="is not empty"):
        host_facts.write_capture(tmp_path / "link")

    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="is a link to .*nowhere, which does not exist"):
        host_facts.write_capture(tmp_path / "dangling")
    assert not (tmp_path / "nowhere").exists()
    (tmp_path / "afile").write_text("mine\n")
    (tmp_path / "to-file").symlink_to(tmp_path / "afile")
    with pytest.raises(NotADirectoryError, match="which is a file, not a directory"):
        host_facts.write_capture(tmp_path / "to-file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "dangling", "link", "real", "to-file"]


def test_cli_capture_errors_are_sentences(tmp_path):
    (tmp_path / "afile").write_text("mine\n")
    result = CliRunner().invoke(app, ["facts", "--capture", str(tmp_path / "afile" / "sub")])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {tmp_path / 'afile'} is a file, not a directory"


def test_capture_into_an_existing_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    written = host_facts.write_capture(tmp_path / "empty")
    assert (tmp_path / "empty" / "meminfo.txt") in written
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == sorted(p.name for p in written)
    assert [p.name for p in tmp_path.iterdir()] == ["empty"]


def test_cli_from_json_and_tables():
    runner = CliRunner()
    result = runner.invoke(app, ["facts", "--from", str(HOSTS / "synthetic-autodl-6430-4090"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == host_facts.from_capture(HOSTS / "synthetic-autodl-6430-4090")
    tables = runner.invoke(app, ["facts", "--from", str(HOSTS / "2xh200-xeon-amx-32c")])
    assert tables.exit_code == 0
    assert "32 physical cores" in tables.stdout and "NVIDIA H200" in tables.stdout and "NV18" in tables.stdout


def test_cli_bad_input():
    runner = CliRunner()
    missing = runner.invoke(app, ["facts", "--from", "/nonexistent/capture"])
    assert missing.exit_code == 1 and "capture folder not found" in missing.output
    both = runner.invoke(app, ["facts", "--from", "a", "--capture", "b"])
    assert both.exit_code == 1 and "not both" in both.output


def test_cli_capture_then_from_in_subprocesses(tmp_path):
    env = {**os.environ, "COLUMNS": "200"}
    run = [sys.executable, "-m", "ktinfra", "facts"]
    done = subprocess.run(
        [*run, "--capture", str(tmp_path / "cap"), "--json"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "cgroup.txt" in json.loads(done.stdout)["files"]
    live = json.loads(
        subprocess.run([*run, "--json"], capture_output=True, text=True, env=env, check=True).stdout
    )
    back = json.loads(
        subprocess.run(
            [*run, "--from", str(tmp_path / "cap"), "--json"], capture_output=True, text=True, check=True
        ).stdout
    )
    assert back["cpu"] == live["cpu"] and back["source"] == str(tmp_path / "cap") and live["source"] == "live"


def test_api_imports_without_typer_or_rich():
    code = (
        "import sys; sys.modules['typer'] = None; sys.modules['rich'] = None\n"
        "import ktinfra.facts as f\n"
        f"print(f.from_capture({str(HOSTS / 'h100-xeon-amx-16c')!r})['cpu']['physical_cores'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "16"


def test_a_command_printing_bytes_that_are_not_utf8_keeps_its_file(tmp_path):
    """A stray byte in one command's output (here uname's) must neither crash facts/plan nor lose the file."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "uname").write_bytes(b"#!/bin/sh\nprintf 'Linux host 6.8.0-\\377\\376 x86_64\\n'\n")
    (bindir / "uname").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "COLUMNS": "200"}
    run = [sys.executable, "-m", "ktinfra"]
    facts = subprocess.run([*run, "facts", "--json"], capture_output=True, text=True, env=env)
    assert facts.returncode == 0, facts.stderr
    assert json.loads(facts.stdout)["os"]["kernel"] == "6.8.0-\ufffd\ufffd"
    plan = subprocess.run(
        [*run, "plan", "-m", "Qwen3-30B-A3B", "--json"], capture_output=True, text=True, env=env
    )
    assert plan.returncode in (0, 2), plan.stderr
    assert json.loads(plan.stdout)["model"]["name"] == "Qwen3-30B-A3B" and "Traceback" not in plan.stderr
    done = subprocess.run([*run, "facts", "--capture", str(tmp_path / "cap")], capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cap" / "uname.txt").read_text() == "Linux host 6.8.0-\ufffd\ufffd x86_64\n"


def test_plan_on_the_live_host_turns_a_read_error_into_a_sentence(monkeypatch):
    def unreadable():
        raise PermissionError(13, "Permission denied", "/proc/self/status")

    monkeypatch.setattr(host_facts, "gather_live", unreadable)
    result = CliRunner().invoke(app, ["plan", "-m", "Qwen3-30B-A3B", "--json"])
    assert result.exit_code == 1
    assert result.output.startswith("error: cannot read this host's facts: [Errno 13] Permission denied")


def test_capture_into_a_loop_of_links_says_so(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    runner = CliRunner()
    for target in (tmp_path / "a", tmp_path / "a" / "sub"):
        result = runner.invoke(app, ["facts", "--capture", str(target)])
        assert result.exit_code == 1
        assert (
            result.output
            == f"error: {tmp_path / 'a'} is a link that leads back to itself (a loop of links)\n"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


@pytest.mark.parametrize("flag", ["--from", "--capture"])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_directory_name_is_refused_not_read_as_this_directory(tmp_path, monkeypatch, flag, value):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["facts", flag, value])
    assert result.exit_code == 1
    assert result.output == f"error: {flag} is empty\n"
    assert list(tmp_path.iterdir()) == []
