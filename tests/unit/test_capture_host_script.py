"""benchmarks/capture_host.sh (the device runs' capture phase): `ktinfra facts --capture` where ktinfra runs,
so the capture holds the cgroup v1 / own-cgroup files and container evidence a CPU quota is read from; a
raw snapshot, said so on stderr, where it does not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "capture_host.sh"


def _run(tmp_path: Path, python_dir: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{python_dir}:/usr/bin:/bin", "PYTHONPATH": ""}
    return subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "cap")], capture_output=True, text=True, env=env
    )


def test_where_ktinfra_runs_the_capture_is_ktinfras_own(tmp_path):
    """Before: the raw commands only, so a cgroup v1 container's CPU quota was not in the capture."""
    proc = _run(tmp_path, str(Path(sys.executable).parent))
    assert proc.returncode == 0, proc.stderr
    names = {p.name for p in (tmp_path / "cap").iterdir()}
    assert {"cgroup.txt", "proc-self-cgroup.txt", "container.txt", "proc-self-status.txt"} <= names


def test_without_ktinfra_a_raw_snapshot_says_so(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to("/bin/false")  # a python3 that cannot import ktinfra
    proc = _run(tmp_path, str(bare))
    assert proc.returncode == 0
    assert "raw snapshot only" in proc.stderr
    names = {p.name for p in (tmp_path / "cap").iterdir()}
    assert "lscpu.txt" in names and "container.txt" not in names


def test_a_raw_snapshot_asks_for_the_c_locale(tmp_path):
    """facts reads lscpu's English field names ("Thread(s) per core:"); under LANG=de_DE lscpu writes
    "Thread(s) pro Kern:". Before, the raw snapshot ran the tools in the caller's locale."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to("/bin/false")
    (bare / "lscpu").write_text('#!/bin/sh\necho "LC_ALL=$LC_ALL"\n')
    (bare / "lscpu").chmod(0o755)
    env = {**os.environ, "PATH": f"{bare}:/usr/bin:/bin", "PYTHONPATH": "", "LC_ALL": "de_DE.UTF-8"}
    command = ["bash", str(SCRIPT), str(tmp_path / "cap")]
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "cap" / "lscpu.txt").read_text() == "LC_ALL=C\n"


OLD_DRIVER_SMI = """#!/bin/sh
case "$*" in
  *compute_cap*) echo 'Field "compute_cap" is not a valid field to query.'; exit 2 ;;
  *--query-gpu*) printf 'index, name, uuid, memory.total [MiB], memory.used [MiB], driver_version, '
                 printf 'pci.bus_id\\n'
                 printf '0, NVIDIA A100-SXM4-80GB, GPU-1, 81920 MiB, 0 MiB, 470.82.01, 00000000:07:00.0\\n' ;;
  *) exit 1 ;;
esac
"""


def test_a_raw_snapshot_asks_an_old_driver_again_without_compute_cap(tmp_path):
    """Drivers before R510 refuse the whole --query-gpu for compute_cap: the raw snapshot kept only the
    refusal, and facts read no GPU from it. A real old driver cannot run here: nvidia-smi is a script that
    answers as R470 does."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to("/bin/false")
    (bare / "nvidia-smi").write_text(OLD_DRIVER_SMI)
    (bare / "nvidia-smi").chmod(0o755)
    proc = _run(tmp_path, str(bare))
    assert proc.returncode == 0, proc.stderr
    csv = (tmp_path / "cap" / "nvidia-smi-query.csv").read_text()
    assert csv.startswith("# ktinfra facts: this driver refused --query-gpu with compute_cap;")
    from ktinfra.facts import from_capture

    (gpu,) = from_capture(tmp_path / "cap")["gpus"]
    assert (gpu["name"], gpu["memory_mib"], gpu["compute_capability"]) == (
        "NVIDIA A100-SXM4-80GB",
        81920,
        "8.0",
    )


def test_a_raw_snapshot_records_each_uname_field(tmp_path):
    """`uname -a` joins the fields with spaces, so a host name holding one shifted the release facts read;
    the raw snapshot recorded `uname -a` alone."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to("/bin/false")
    proc = _run(tmp_path, str(bare))
    assert proc.returncode == 0, proc.stderr
    held = {flag: (tmp_path / "cap" / f"uname-{flag}.txt").read_text() for flag in "srm"}
    assert held == {
        "s": os.uname().sysname + "\n",
        "r": os.uname().release + "\n",
        "m": os.uname().machine + "\n",
    }


def test_a_raw_snapshot_records_each_numa_nodes_memory(tmp_path):
    """The planner checks each kt-kernel pool's share against its node's memory (memory.numa_node_bytes);
    facts read it from node-meminfo.txt, which the raw snapshot did not record."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to("/bin/false")
    proc = _run(tmp_path, str(bare))
    assert proc.returncode == 0, proc.stderr
    held = (tmp_path / "cap" / "node-meminfo.txt").read_text()
    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"), key=lambda p: int(p.name[4:]))
    assert nodes, "this machine shows no NUMA node in sysfs"
    now = "".join((node / "meminfo").read_text() for node in nodes)

    def fields(text: str) -> list[str]:  # the counters move between two reads, the names and MemTotal do not
        return [line.split(":")[0] if "MemTotal" not in line else line for line in text.splitlines()]

    assert fields(held) == fields(now)
    assert f"Node {nodes[0].name[4:]} MemTotal:" in held
