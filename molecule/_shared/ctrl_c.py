"""Start ansible-playbook as a terminal would and press Ctrl-C on it. Used by the molecule verify tests
(ansible_run.interrupt_playbook) and by the unit suite's plays (tests/unit/role_play.interrupt_play)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def start_in_own_group(command: list[str], env: dict, stdout) -> subprocess.Popen:
    """`command` as the leader of a new process group, stderr into `stdout`, text mode."""
    return subprocess.Popen(
        command,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
        # SIGINT as a terminal's process has it, also where this run inherited it ignored (started by `&`)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def ctrl_c_until_exit(proc: subprocess.Popen, seconds: float = 300) -> None:
    """SIGINT to the process group of `proc` (what a terminal's Ctrl-C sends ansible-playbook and the
    commands it runs), again every 0.1 s until it exits. Pressed again because Ansible raises
    KeyboardInterrupt from its signal handler wherever the main thread is: where that is a fork hook
    (logging's _releaseLock), Python prints "Exception ignored" and the play goes on to its end (seen once
    in CI)."""
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            pass
    proc.wait(timeout=60)
    _kill_what_outlived(proc.pid)


def _kill_what_outlived(group: int) -> None:
    """SIGKILL what the play started and left running in its process group (seen: the pip that `python -m
    venv` runs went on writing into the venv after ansible-playbook exited, and the next run's `venv --clear`
    failed with "Directory not empty"), then wait until it is gone: the next run meets what the cut-off run
    left, not a race with it."""
    deadline = time.monotonic() + 30
    while _members(group) and time.monotonic() < deadline:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _members(group: int) -> list[int]:
    """The live (not zombie) processes of process group `group`, from /proc."""
    return _live(lambda _proc, fields: int(fields[2]) == group)


def kill_what_runs_under(root: Path, seconds: float = 30) -> None:
    """SIGKILL, and wait for, every live process whose executable or command line names a path under `root`
    (a test's folder), wherever its process group is: _kill_what_outlived missed one on a loaded run here, a
    run's `venv --clear` again failing with "Directory not empty: '_internal'" while the cut-off run's pip,
    run by the venv's own python, was still writing there."""
    deadline = time.monotonic() + seconds
    while (found := _running_under(str(root))) and time.monotonic() < deadline:
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _running_under(root: str) -> list[int]:
    """The live processes whose executable or an argument names `root` or a path under it."""

    def names_root(proc: Path, _fields: list[str]) -> bool:
        names = [
            os.readlink(proc / "exe"),
            *(proc / "cmdline").read_bytes().decode(errors="replace").split("\0"),
        ]
        return any(name == root or f"{root}/" in name for name in names)

    return _live(names_root)


def _live(match: Callable[[Path, list[str]], bool]) -> list[int]:
    """The pids of the live (not zombie) processes but this one for which match(/proc/PID, the fields of its
    stat after the command name) holds; one that ends, or is not ours to read, while it is looked at is left
    out."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(proc.name) != os.getpid() and match(proc, fields):
                found.append(int(proc.name))
        except (OSError, IndexError, ValueError):
            continue
    return found
