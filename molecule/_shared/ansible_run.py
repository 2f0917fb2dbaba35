"""Run a playbook against the scenario's instance from a verify test (molecule's inventory, this checkout's
roles). The scenarios' tests/conftest.py put this folder on sys.path."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KT_SERVE = Path(__file__).resolve().parent / "kt-serve.yml"  # kt_serve alone on the kt_serve group
ENV = {
    "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
    "ANSIBLE_PIPELINING": "true",
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_FORCE_COLOR": "0",
}


def _command(playbook: Path, extra: dict | None, args: tuple[str, ...]) -> list[str]:
    playbook_exe = Path(sys.executable).parent / "ansible-playbook"
    command = [str(playbook_exe), "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(playbook), *args]
    return command + (["-e", json.dumps(extra)] if extra else [])


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def run_playbook(playbook: Path, extra: dict | None = None, *args: str) -> tuple[int, str]:
    """(exit code, output without colour codes) of ansible-playbook over molecule's inventory."""
    command = _command(playbook, extra, args)
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **ENV}, timeout=900)
    return proc.returncode, _plain(proc.stdout + proc.stderr)


def interrupt_playbook(playbook: Path, extra: dict | None, at_task: str) -> tuple[int, str]:
    """As run_playbook, pressing Ctrl-C (SIGINT to the play's process group, as a terminal sends it) as soon
    as the play prints the header of the task named `at_task` ("role : name"), i.e. once the task before it
    finished; pressed again every 0.1 s until ansible-playbook exits. Ansible raises KeyboardInterrupt from
    its signal handler wherever the main thread is: where that is a fork hook (logging's _releaseLock),
    Python prints "Exception ignored" and the play went on to the end (seen once in CI)."""
    proc = subprocess.Popen(
        _command(playbook, extra, ()),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **ENV, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
        # SIGINT as a terminal's process has it, also where this run inherited it ignored (started by `&`)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if _plain(line).startswith(f"TASK [{at_task}"):
            break
    reader = threading.Thread(target=lambda: seen.extend(proc.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            pass
    proc.wait(timeout=60)
    reader.join(timeout=60)
    return proc.returncode, _plain("".join(seen))


def serve_args_of(host, pid: str) -> str:
    """KT_SERVE_ARGS as process `pid` of the testinfra `host` got it from its env file when it started."""
    environ = host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/environ")
    return next(line for line in environ.splitlines() if line.startswith("KT_SERVE_ARGS="))
