"""Run a playbook against the scenario's instance from a verify test (molecule's inventory, this checkout's
roles). The scenarios' tests/conftest.py put this folder on sys.path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from ctrl_c import ctrl_c_until_exit, start_in_own_group

REPO = Path(__file__).resolve().parents[2]
KT_SERVE = Path(__file__).resolve().parent / "kt-serve.yml"  # kt_serve alone on the kt_serve group
ENV = {
    "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
    "ANSIBLE_PIPELINING": "true",
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_FORCE_COLOR": "0",
}


PROBE_WHEEL = "/srv/wheels/ktprobe-0.4.2+cpu-py3-none-any.whl"  # _shared/site-profile.yaml's local wheel


def probe_pin(host) -> dict:
    """kt_python_env_wheels pinning the site profile's local wheel to its checksum, as a user's group_vars
    would: the converges set it as a fact (pin-probe-wheel.yml), which a later ansible-playbook run lacks, and
    every run that reaches preflight (train.yml --tags train too) checks the profile's pins."""
    sha = host.check_output(f"sha256sum {PROBE_WHEEL}").split()[0]
    return {"kt_python_env_wheels": {"ktprobe": {"sha256": sha}}}


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


def task_output(output: str, name: str) -> str:
    """What the play printed under the first task whose name (after "role : ") starts with `name`; "" when
    no such task ran."""
    for block in output.split("TASK [")[1:]:
        if block.split(" : ", 1)[-1].startswith(name):
            return block
    return ""


def interrupt_playbook(playbook: Path, extra: dict | None, at_task: str) -> tuple[int, str]:
    """As run_playbook, pressing Ctrl-C (ctrl_c.ctrl_c_until_exit) as soon as the play prints the header of
    the task named `at_task` ("role : name"), i.e. once the task before it finished."""
    env = {**os.environ, **ENV, "PYTHONUNBUFFERED": "1"}
    proc = start_in_own_group(_command(playbook, extra, ()), env, subprocess.PIPE)
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if _plain(line).startswith(f"TASK [{at_task}"):
            break
    reader = threading.Thread(target=lambda: seen.extend(proc.stdout), daemon=True)
    reader.start()
    ctrl_c_until_exit(proc)
    reader.join(timeout=60)
    return proc.returncode, _plain("".join(seen))


def main_pid(host, unit: str) -> str:
    """The MainPID systemd shows for `unit` on the testinfra `host` ("0" when it runs no process)."""
    return host.check_output(f"systemctl show -p MainPID --value {unit}")


def serve_args_of(host, pid: str) -> str:
    """KT_SERVE_ARGS as process `pid` of the testinfra `host` got it from its env file when it started."""
    environ = host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/environ")
    return next(line for line in environ.splitlines() if line.startswith("KT_SERVE_ARGS="))


def http_status(host, port: int, path: str = "/") -> int:
    """The HTTP status a GET of 127.0.0.1:`port``path` gets on the testinfra `host` (0: no answer)."""
    fetch = f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}{path}', timeout=5).status)"
    return int(host.run(f'python3 -c "{fetch}"').stdout.strip() or 0)
