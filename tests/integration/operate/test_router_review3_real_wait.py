"""kt_router's health wait (real ansible on localhost, -c local) against a real sglang-router 0.3.2 in front
of a stand-in SGLang worker (a local HTTP server answering /health only: the router also asks for /server_info
and /model_info and takes the worker without them) and a worker URL nothing answers. The router's own
/health is 200 either way.
Also: kt_router_policy's choices are the real router's."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit"))
from conftest import free_port  # noqa: E402
from role_play import ROLES, run_play  # noqa: E402


class Worker(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def worker():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Worker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def wait(tmp_path, router_url, workers):
    port = int(router_url.rsplit(":", 1)[1])
    extra = {"kt_router_host": "127.0.0.1", "kt_router_port": port, "kt_router_health_timeout": 15,
             "kt_router_wait_health": True, "kt_router_worker_api_key": "",
             "kt_router_workers": workers}  # fmt: skip
    role = {"name": "kt_router"}
    tasks = [{"ansible.builtin.include_role": role | {"tasks_from": t}} for t in ("workers", "health")]
    return run_play(tmp_path, tasks, extra)


def test_a_real_router_with_no_worker_that_answers_fails_the_run(tmp_path, launch_router):
    """Before: its /health answered 200 and the run ended green."""
    dead = f"http://127.0.0.1:{free_port()}"
    with launch_router([dead], tmp_path / "router.log") as url:
        rc, output = wait(tmp_path, url, [dead])
    assert rc != 0, output[-3000:]
    assert "has no healthy worker after 15 s (its /health answers 200 without one)" in output, output[-3000:]
    assert f"not taken in or not healthy: {dead}: check that each answers /health" in output


def test_a_real_router_with_one_worker_up_passes_and_names_the_other(tmp_path, launch_router, worker):
    dead = f"http://127.0.0.1:{free_port()}"
    with launch_router([worker, dead], tmp_path / "router.log") as url:
        rc, output = wait(tmp_path, url, [worker, dead])
    assert rc == 0, output[-3000:]
    assert f"the router routes to 1 of 2 workers; not taken in or not healthy after 15 s: {dead}" in output


def test_the_roles_policies_are_the_real_routers(serve_python):
    """kt_router_policy's choices (meta/argument_specs.yml) are sglang-router's --policy choices."""
    helped = subprocess.run(
        [str(serve_python), "-m", "sglang_router.launch_router", "--help"], capture_output=True, text=True
    )
    assert helped.returncode == 0, helped.stderr[-2000:]
    choices = re.search(r"--policy \{([a-z_,]+)\}", helped.stdout).group(1).split(",")
    spec = yaml.safe_load((ROLES / "kt_router" / "meta" / "argument_specs.yml").read_text())
    assert spec["argument_specs"]["main"]["options"]["kt_router_policy"]["choices"] == choices
