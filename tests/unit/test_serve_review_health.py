"""kt_serve's /health wait (tasks/main.yml), run by real ansible against a real HTTP server on this host."""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path

import pytest
import yaml
from role_play import run_play

MAIN = Path(__file__).resolve().parents[2] / "roles" / "kt_serve" / "tasks" / "main.yml"


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_health_wait_reaches_the_local_server_past_a_proxy_in_the_environment(tmp_path, server):
    """A play or host environment with an HTTP proxy (pip downloads behind one, AutoDL's network_turbo):
    before, the wait sent http://127.0.0.1:PORT/health to the proxy, which cannot reach this host's loopback,
    and failed after kt_serve_health_timeout with the server up and healthy."""
    wait = next(t for t in yaml.safe_load(MAIN.read_text()) if t["name"].startswith("Wait for /health"))
    proxy = f"http://127.0.0.1:{_closed_port()}"
    extra = {
        "kt_serve__rendered": {"q": {"health_url": f"http://127.0.0.1:{server}/health"}},
        "kt_serve__resolved": [{"name": "q", "state": "started"}, {"name": "off", "state": "stopped"}],
        "kt_serve_wait_health": True,
        "kt_serve_health_timeout": 2,
        "kt_serve_health_interval": 1,
    }
    env = {"http_proxy": proxy, "HTTP_PROXY": proxy, "no_proxy": "", "NO_PROXY": ""}
    rc, output = run_play(tmp_path, [wait], extra, env=env)
    assert rc == 0, output[-3000:]
    assert "ok: [localhost] => (item=q)" in output
