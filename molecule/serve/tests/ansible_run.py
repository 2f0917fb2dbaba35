"""Run a playbook against the scenario's instance from a verify test (molecule's inventory and roles)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
ENV = {
    "ANSIBLE_ROLES_PATH": str(SCENARIO.parents[1] / "roles"),
    "ANSIBLE_PIPELINING": "true",
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_FORCE_COLOR": "0",
}


def run_playbook(playbook: Path, extra: dict | None = None, *args: str) -> tuple[int, str]:
    """(exit code, output without colour codes) of ansible-playbook over molecule's inventory."""
    playbook_exe = Path(sys.executable).parent / "ansible-playbook"
    command = [str(playbook_exe), "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(playbook), *args]
    command += ["-e", json.dumps(extra)] if extra else []
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **ENV}, timeout=900)
    return proc.returncode, re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
