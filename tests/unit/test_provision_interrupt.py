"""Ctrl-C on `ktinfra provision`: a real run of a slow local playbook, interrupted, leaves no process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SLOW = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Wait a long time
      ansible.builtin.wait_for: {timeout: 90}
"""


def _processes_naming(marker: str) -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline:
                found[int(entry.name)] = cmdline
    return found


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_interrupt_stops_ansibles_workers_and_modules(tmp_path: Path) -> None:
    """ansible-runner's cancel SIGKILLed the ansible-playbook process group only: the worker (a session
    leader of its own) and its AnsiballZ_wait_for module ran on after provision had exited."""
    (tmp_path / "slow.yml").write_text(SLOW)
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={shutil.which('python3')}\n"
    )
    marker = str(tmp_path)  # in the playbook's path and, through ANSIBLE_REMOTE_TMP, in the module's
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "ANSIBLE_REMOTE_TMP": f"{marker}/remote",
        "ANSIBLE_LOCAL_TEMP": f"{marker}/local",
    }
    args = [sys.executable, "-m", "ktinfra", "provision", "slow.yml", "-i", "hosts", "--json"]
    proc = subprocess.Popen(
        [*args, "--artifacts", "runs"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        module_running = lambda: any("AnsiballZ_wait_for" in c for c in _processes_naming(marker).values())  # noqa: E731
        assert _wait_for(module_running, 60), "the wait_for module never started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
        report = json.loads(out)
        assert report["status"] == "canceled" and not report["ok"]
        assert _wait_for(lambda: not _processes_naming(marker), 20), _processes_naming(marker)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _processes_naming(marker):  # what this test started and the run left behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
