"""Run a play with real ansible-playbook on localhost (-c local), with this checkout's roles."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"


def run_play(
    tmp: Path,
    tasks: list,
    extra: dict | None = None,
    cli: list[str] | None = None,
    inventory: str = "localhost,",
    env: dict | None = None,
    flags: list[str] | None = None,
) -> tuple[int, str]:
    """Run `tasks` on localhost; `extra` goes in as typed JSON, `cli` as raw -e key=value strings, `flags`
    as ansible-playbook options (--check)."""
    command, run_env = _playbook(tmp, tasks, extra, cli, inventory, env, flags)
    proc = subprocess.run(command, capture_output=True, text=True, env=run_env, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def interrupt_play(tmp: Path, tasks: list, extra: dict, when_exists: Path) -> tuple[int, str]:
    """Run `tasks` as run_play does and press Ctrl-C (SIGINT to the play's process group, as a terminal
    sends it to ansible-playbook and the command it runs) as soon as `when_exists` appears, and again until
    the play exits."""
    command, run_env = _playbook(tmp, tasks, extra, None, "localhost,", None, None)
    log = tmp / "interrupted.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=run_env,
            start_new_session=True,
            # SIGINT as a terminal's process has it, also where this run inherited it ignored (started by `&`)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 300
        while not os.path.lexists(when_exists) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        # pressed again every 0.1 s until it exits: Ansible raises KeyboardInterrupt from its signal handler
        # wherever the main thread is, and one raised in a fork hook (logging's _releaseLock) is only printed
        while proc.poll() is None and time.monotonic() < deadline + 60:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
        proc.wait(timeout=60)
    return proc.returncode, log.read_text()


def task_output(output: str, name: str) -> str:
    """What the play printed under the first task whose name (after "role : ") starts with `name`; "" when
    no such task ran."""
    for block in output.split("TASK [")[1:]:
        if block.split(" : ", 1)[-1].startswith(name):
            return block
    return ""


def _playbook(tmp, tasks, extra, cli, inventory, env, flags) -> tuple[list[str], dict]:
    play = tmp / "play.yml"
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    (tmp / "vars.json").write_text(json.dumps({"ansible_python_interpreter": sys.executable} | (extra or {})))
    run_env = dict(os.environ, ANSIBLE_ROLES_PATH=str(ROLES), ANSIBLE_LOCALHOST_WARNING="false") | (env or {})
    run_env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    command = [playbook, "-i", inventory, "-c", "local", str(play), "-e", f"@{tmp / 'vars.json'}"]
    for item in cli or []:
        command += ["-e", item]
    command += flags or []
    return command, run_env
