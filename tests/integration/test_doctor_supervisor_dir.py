"""`ktinfra doctor --supervisor-dir` over docker:// against a container whose PID 1 is not systemd, with
kt_serve's supervisord layout under /srv/supervisor (kt_serve_supervisor_dir) and its venv at /srv/sup
(kt_serve_supervisor_venv): the supervised-programs check reads that directory and asks that venv's
supervisorctl (a stand-in printing `status`). Before, the check looked in /etc/ktinfra/supervisor only and
was skipped as 'not installed' whatever the programs' state."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "ktinfra/debian12-systemd:latest"
CHECK = "services.supervised_programs_running"
PROGRAM = (
    "[program:ktinfra-serve-q]\\ncommand=/bin/sh -c true\\nautostart=true\\n\\n"
    "[eventlistener:ktinfra-start-limit-q]\\ncommand=/srv/sup/bin/python -c pass ktinfra-serve-q 3 600 x\\n"
)


def docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True)


def say(box: str, state: str) -> None:
    listener = "ktinfra-start-limit-q  RUNNING   pid 8, uptime 0:01:00"
    lines = f"'ktinfra-serve-q  {state}' '{listener}'"
    docker("exec", box, "sh", "-c", f"printf '%s\\n' {lines} > /srv/status.txt")


@pytest.fixture(scope="module")
def box():
    name = f"doctor-supdir-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, "--entrypoint", "sleep", IMAGE, "infinity")
    try:
        setup = (
            "mkdir -p /srv/supervisor/conf.d /srv/sup/bin"
            " && echo '[supervisord]' > /srv/supervisor/supervisord.conf"
            f" && printf '{PROGRAM}' > /srv/supervisor/conf.d/ktinfra-serve-q.conf"
            " && printf '#!/bin/sh\\ncat /srv/status.txt\\n' > /srv/sup/bin/supervisorctl"
            " && chmod 755 /srv/sup/bin/supervisorctl"
        )
        docker("exec", name, "sh", "-c", setup)
        yield name
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def doctor(name: str, *args: str) -> tuple[int, tuple[str, str]]:
    res = subprocess.run(
        [sys.executable, "-m", "ktinfra", "doctor", "--hosts", f"docker://{name}", "--role", "any",
         "-k", "supervised", "--json", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert res.stdout, res.stderr
    checks = {c["id"]: (c["status"], c["message"]) for c in json.loads(res.stdout)["checks"]}
    return res.returncode, checks[CHECK]


def test_the_supervisor_dir_given_is_checked(box):
    say(box, "FATAL     Exited too quickly (process log may have details)")
    rc, (status, message) = doctor(box)
    assert status == "skipped" and "--supervisor-dir" in message, message
    rc, (status, message) = doctor(box, "--supervisor-dir", "/srv/supervisor")
    assert rc == 1 and status == "failed" and "ktinfra-serve-q FATAL" in message, message
    say(box, "RUNNING   pid 9, uptime 0:01:00")
    rc, (status, message) = doctor(box, "--supervisor-dir", "/srv/supervisor")
    assert rc == 0 and status == "passed", message
