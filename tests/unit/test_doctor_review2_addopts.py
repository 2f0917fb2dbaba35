"""`ktinfra doctor` runs the whole KT host suite whatever PYTEST_ADDOPTS the caller's shell holds: a
developer's `-k cpu` (or `-x`) there was read by the suite's pytest, the other checks were deselected
without a word, and doctor reported the few that ran as the host's verdict (exit 0 on a host whose GPU or
env checks were never run). The real suite on this machine, as `ktinfra doctor` runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _doctor(addopts: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    if addopts is not None:
        env["PYTEST_ADDOPTS"] = addopts
    done = subprocess.run(
        [sys.executable, "-m", "ktinfra", "doctor", "--role", "any", "--json"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode in (0, 1) and done.stdout, done.stderr
    return json.loads(done.stdout)


def test_pytest_addopts_selects_nothing_of_the_suite():
    whole = sorted(c["id"] for c in _doctor(None)["checks"])
    assert any(not i.startswith("cpu.") for i in whole) and any(i.startswith("cpu.") for i in whole)
    assert sorted(c["id"] for c in _doctor("-k cpu")["checks"]) == whole
    assert sorted(c["id"] for c in _doctor("-x --maxfail=1")["checks"]) == whole
