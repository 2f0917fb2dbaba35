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
