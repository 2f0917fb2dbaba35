"""`ktinfra doctor` over docker:// against a container whose PID 1 is not systemd, the shape kt_serve's
supervisord fallback serves on (most containers, AutoDL included): the health check finds the instances
through their env files in /etc/ktinfra/serve and fails a dead server. Before, with no unit list, both
service checks were skipped and a dead server passed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "ktinfra/debian12-systemd:latest"
PORT = 30123


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check)


@pytest.fixture(scope="module")
def box():
    name = f"doctor-supervised-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, "--entrypoint", "sleep", IMAGE, "infinity")
    try:
        env = f"KT_SERVE_ARGS=x\nKT_HEALTH_URL=http://127.0.0.1:{PORT}/health\n"
        setup = (
            f"mkdir -p /etc/ktinfra/serve /www && printf '{env}' > /etc/ktinfra/serve/q.env "
            "&& chmod 600 /etc/ktinfra/serve/q.env && echo ok > /www/health"
        )
        docker("exec", name, "sh", "-c", setup)
        yield name
    finally:
        docker("rm", "-f", name, check=False)


def doctor(name: str) -> tuple[int, dict]:
    res = subprocess.run(
        [sys.executable, "-m", "ktinfra", "doctor", "--hosts", f"docker://{name}", "--role", "any",
         "-k", "services", "--json"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    report = json.loads(res.stdout)
    return res.returncode, {c["id"]: (c["status"], c["message"]) for c in report["checks"]}


def test_a_dead_server_fails_and_a_live_one_passes_without_systemd(box):
    rc, checks = doctor(box)
    assert rc == 1
    assert checks["services.units_enabled_and_active"][0] == "skipped"  # PID 1 is sleep
    status, message = checks["services.health_endpoint_answers"]
    assert status == "failed" and f"http://127.0.0.1:{PORT}/health" in message, message
    docker(
        "exec",
        "-d",
        box,
        "python3",
        "-m",
        "http.server",
        str(PORT),
        "--bind",
        "127.0.0.1",
        "--directory",
        "/www",
    )
    for _ in range(50):
        if docker("exec", box, "python3", "-c", f"import urllib.request as u; u.urlopen('http://127.0.0.1:{PORT}/health')",
                  check=False).returncode == 0:  # fmt: skip
            break
        time.sleep(0.1)
    rc, checks = doctor(box)
    assert checks["services.health_endpoint_answers"][0] == "passed", checks
    assert rc == 0
