"""Live facts: an nvidia-smi stuck in uninterruptible sleep (a driver call that never returns, state D).

SIGKILL takes effect only when such a call returns, and subprocess.run, after its timeout, killed the command
and then waited for it without a limit: `ktinfra facts` hung for as long as the driver did. The stand-in is a
real process in that state: it puts itself in a cgroup-v1 freezer cgroup and freezes it (/proc shows it as
`D (disk sleep)`, and SIGKILL waits for the thaw), as this host and CI's have.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from ktinfra.facts import capture as capture_module

FREEZER = Path("/sys/fs/cgroup/freezer")

SCRIPT = """#!/bin/sh
echo $$ > "$KT_CGROUP/tasks"
echo FROZEN > "$KT_CGROUP/freezer.state"
exec sleep 30
"""


def test_a_command_stuck_in_uninterruptible_sleep_is_left_behind_after_the_timeout(tmp_path, monkeypatch):
    cgroup = FREEZER / f"ktinfra-test-{os.getpid()}-{time.monotonic_ns()}"
    cgroup.mkdir()
    smi = tmp_path / "nvidia-smi"
    smi.write_text(SCRIPT)
    smi.chmod(0o755)
    monkeypatch.setenv("KT_CGROUP", str(cgroup))
    monkeypatch.setattr(capture_module, "COMMAND_TIMEOUT_S", 1.0)
    monkeypatch.setattr(capture_module, "_hung", set())
    result: list = []
    worker = threading.Thread(
        target=lambda: result.append(capture_module._run([str(smi), "-L"])), daemon=True
    )
    try:
        worker.start()
        worker.join(timeout=20)
        stuck = (cgroup / "tasks").read_text().split()
        assert stuck, "the stand-in never reached its frozen cgroup"
        assert "State:\tD" in Path(f"/proc/{stuck[0]}/status").read_text()
        assert not worker.is_alive(), "_run still waits for a command stuck in D state"
        assert result == [None] and str(smi) in capture_module._hung
    finally:
        (cgroup / "freezer.state").write_text("THAWED\n")
        worker.join(timeout=20)
        for _ in range(100):  # the killed command exits once thawed; the cgroup is removable when empty
            try:
                cgroup.rmdir()
                break
            except OSError:
                time.sleep(0.1)
