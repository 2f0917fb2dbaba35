"""SIGHUP to `ktinfra provision` (the controller's terminal went away: a dropped ssh session).

Ctrl-C and SIGTERM stop the run step by step (tests/unit/test_provision_interrupt.py), but SIGHUP kept its
default action: ktinfra ended at once, without a report, and Ansible's worker (a session leader of its own)
with its AnsiballZ_wait_for module ran on, on the host, for the rest of its 90 s. SIGHUP is now handled as
SIGTERM is. A real run of a slow local playbook in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from test_provision_interrupt import REPO, SLOW
from test_provision_interrupt import _processes_naming as processes_naming
from test_provision_interrupt import _wait_for as wait_for


def test_a_hangup_stops_ansibles_workers_and_modules(tmp_path: Path) -> None:
    (tmp_path / "slow.yml").write_text(SLOW)
    python = shutil.which("python3")
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={python}\n"
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
        module_running = lambda: any("AnsiballZ_wait_for" in c for c in processes_naming(marker).values())  # noqa: E731
        assert wait_for(module_running, 60), "the wait_for module never started"
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
        left = processes_naming(marker) if not wait_for(lambda: not processes_naming(marker), 20) else {}
        assert proc.returncode == 1, (proc.returncode, err[-2000:], left)
        assert left == {}
        report = json.loads(out)
        assert report["status"] == "canceled" and not report["ok"]
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in processes_naming(marker):  # what this test started and the run left behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
