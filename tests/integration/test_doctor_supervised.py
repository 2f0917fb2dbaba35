"""`ktinfra doctor` over docker:// against a container whose PID 1 is not systemd, the shape kt_serve's
supervisord fallback serves on (most containers, AutoDL included): the health check finds the instances
through their env files in /etc/ktinfra/serve and fails a dead server. Before, with no unit list, both
service checks were skipped and a dead server passed."""

from __future__ import annotations

import subprocess
import time

import pytest
from systemd_box import doctor_checks, plain_box

PORT = 30123


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check)


@pytest.fixture(scope="module")
def box():
    env = f"KT_SERVE_ARGS=x\nKT_HEALTH_URL=http://127.0.0.1:{PORT}/health\n"
    setup = (
        f"mkdir -p /etc/ktinfra/serve /www && printf '{env}' > /etc/ktinfra/serve/q.env "
        "&& chmod 600 /etc/ktinfra/serve/q.env && echo ok > /www/health"
    )
    with plain_box("doctor-supervised", setup) as name:
        yield name


def doctor(name: str) -> tuple[int, dict]:
    returncode, checks = doctor_checks(name, "-k", "services")
    return returncode, {id_: (c["status"], c["message"]) for id_, c in checks.items()}


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
