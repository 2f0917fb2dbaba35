"""Run a play with real ansible-playbook on localhost (-c local), with this checkout's roles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    proc = subprocess.run(command, capture_output=True, text=True, env=run_env, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr
