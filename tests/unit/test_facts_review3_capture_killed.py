"""`ktinfra facts --capture a/b/cap` creates a and b, then runs the capture's commands (a minute when
nvidia-smi is slow). Ctrl-C there removed them again; SIGTERM (kill, a job scheduler) and SIGHUP (the SSH
session closed) killed the process where it stood and left the empty folders behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# a slow first command: lscpu, the first of the capture's sources; it notes its pid for the cleanup below
SLOW_LSCPU = '#!/bin/sh\necho $$ >> "$SLOW_PIDS"\nexec sleep 20\n'


def _start(tmp_path: Path, argv: list[str]) -> subprocess.Popen:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "lscpu").write_text(SLOW_LSCPU)
    (bindir / "lscpu").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "SLOW_PIDS": str(tmp_path / "pids")}
    return subprocess.Popen(
        [sys.executable, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(path: Path) -> None:
    for _ in range(600):
        if path.exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def _stop_slow_commands(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    for pid in pids.read_text().split() if pids.exists() else []:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
def test_a_capture_killed_while_its_commands_run_leaves_nothing(tmp_path, number):
    out = tmp_path / "out"
    out.mkdir()
    target = out / "a" / "b" / "cap"
    proc = _start(tmp_path, ["-m", "ktinfra", "facts", "--capture", str(target)])
    try:
        _wait_for(tmp_path / "pids")  # the folders are made, the first command runs
        assert (out / "a" / "b").is_dir()
        proc.send_signal(number)
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
        _stop_slow_commands(tmp_path)
    assert proc.returncode == 128 + number, stderr  # before: -15 / -1, killed by the signal
    assert "Traceback" not in stderr
    assert list(out.iterdir()) == []  # before: a/b left behind


def test_an_ignored_hangup_stays_ignored(tmp_path):
    """Under nohup SIGHUP is ignored: the capture goes on (here it is then stopped with SIGTERM)."""
    out = tmp_path / "out"
    out.mkdir()
    code = (
        "import runpy, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
        "sys.argv = ['ktinfra', 'facts', '--capture', sys.argv[1]]; "
        "runpy.run_module('ktinfra', run_name='__main__')"
    )
    proc = _start(tmp_path, ["-c", code, str(out / "a" / "cap")])
    try:
        _wait_for(tmp_path / "pids")
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert proc.poll() is None  # still capturing
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
        _stop_slow_commands(tmp_path)
    assert proc.returncode == 128 + signal.SIGTERM
    assert list(out.iterdir()) == []
