"""The kt_router unit's ExecStart (roles/kt_router/templates/ktinfra-router.service.j2) run with the real
sglang-router of the serving venv: the workers' API key comes from KT_ROUTER_API_KEY (router.env), is
enforced on the router's clients, and is not on its command line. Before, router.env put --api-key=KEY into
KT_ROUTER_ARGS, which systemd expands into argv: readable by every local user in ps and /proc/PID/cmdline."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import requests
from conftest import free_port

UNIT = Path(__file__).resolve().parents[3] / "roles" / "kt_router" / "templates" / "ktinfra-router.service.j2"
KEY = "k3y+/=~_.-not-on-the-command-line"


def exec_start(serve_python: Path, args: list[str]) -> list[str]:
    """The template's ExecStart with its venv python and $KT_ROUTER_ARGS filled in (systemd splits the line
    like a shell here: one single-quoted word, the rest at whitespace)."""
    line = next(line for line in UNIT.read_text().splitlines() if line.startswith("ExecStart="))
    line = line.removeprefix("ExecStart=").replace("{{ kt_router_venv }}/bin/python", str(serve_python))
    argv = shlex.split(line)
    assert argv[-1] == "$KT_ROUTER_ARGS"
    return argv[:-1] + args


def test_the_router_unit_takes_the_key_from_its_environment(serve_python, tmp_path):
    port = free_port()
    args = ["--host", "127.0.0.1", "--port", str(port), "--policy", "random", "--worker-urls",
            f"http://127.0.0.1:{free_port()}", "--prometheus-port", str(free_port())]  # fmt: skip
    env = os.environ | {"KT_ROUTER_API_KEY": KEY}
    log = (tmp_path / "router.log").open("w")
    proc = subprocess.Popen(exec_start(serve_python, args), env=env, stdout=log, stderr=subprocess.STDOUT)
    seen = set()  # the command lines read until the router sets its title ("sglang::router") over them
    while not any("sglang::router" in c for c in seen) and proc.poll() is None:
        seen.add(Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode(errors="replace"))
    try:
        url = f"http://127.0.0.1:{port}/workers"
        deadline = time.monotonic() + 60
        while True:
            try:
                status = requests.get(url, timeout=2).status_code
                break
            except requests.ConnectionError:
                assert proc.poll() is None and time.monotonic() < deadline, (
                    tmp_path / "router.log"
                ).read_text()
                time.sleep(0.5)
        assert status == 401  # the key is enforced
        assert requests.get(url, headers={"Authorization": f"Bearer {KEY}"}, timeout=5).status_code == 200
        assert requests.get(url, headers={"Authorization": "Bearer wrong"}, timeout=5).status_code == 401
        started = [c for c in seen if "--port" in c]
        assert started and all("KT_ROUTER_API_KEY" in c for c in started)  # the launch code, not the key
        assert not [c for c in seen if KEY in c]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert re.search(r"Starting router on 127\.0\.0\.1", (tmp_path / "router.log").read_text())
