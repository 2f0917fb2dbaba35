"""kt_router's wait for its workers, run by real ansible on localhost (-c local) against a local HTTP server
that answers as sglang-router 0.3.2 does (probed with its wheel): /health is 200 with no worker at all, and
/workers lists the workers it took in ({"workers": [{"url": ..., "is_healthy": ...}], ...}), behind the key.
tests/integration/operate/test_router_review3_real_wait.py runs the same wait against the real router."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from role_play import run_play

GOOD, SLOW, DEAD = "http://127.0.0.1:30001", "http://127.0.0.1:30002", "http://127.0.0.1:30003"


class Router(BaseHTTPRequestHandler):
    listed: list = []
    seen: list = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        Router.seen.append((self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") != "Bearer k3y":
            self.send_response(401)
            self.end_headers()
            return
        body = b"OK"
        if self.path == "/workers":
            workers = [{"url": url, "is_healthy": ok, "worker_type": "regular"} for url, ok in self.listed]
            body = json.dumps({"workers": workers, "total": len(workers)}).encode()
        self.send_response(200 if self.path in ("/health", "/workers") else 404)
        self.send_header("Content-Type", "application/json" if self.path == "/workers" else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def router():
    server = HTTPServer(("127.0.0.1", 0), Router)
    Router.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def wait(tmp_path, port, workers, listed):
    """The role's worker list (kt_router_workers) and its health wait against the stand-in router: a
    timeout of 1 s, one check a second (kt_router__check_interval; the role waits 5 s between checks)."""
    Router.listed = listed
    extra = {"kt_router_host": "127.0.0.1", "kt_router_port": port, "kt_router_health_timeout": 1,
             "kt_router__check_interval": 1, "kt_router_wait_health": True, "kt_router_worker_api_key": "k3y",
             "kt_router_workers": workers}  # fmt: skip
    role = {"name": "kt_router"}
    tasks = [{"ansible.builtin.include_role": role | {"tasks_from": t}} for t in ("workers", "health")]
    return run_play(tmp_path, tasks, extra)


def test_a_router_without_a_healthy_worker_fails_the_run_naming_them(tmp_path, router):
    """Before: /health answered 200 and the run ended green with every worker left out."""
    rc, output = wait(tmp_path, router, [GOOD, DEAD], [(GOOD, False)])
    assert rc != 0, output[-3000:]
    assert "has no healthy worker after 1 s" in output, output[-3000:]
    named = f"not taken in or not healthy: {GOOD}, {DEAD}: check that each answers /health from this host;"
    assert named in output, output[-3000:]
    assert "k3y" not in output
    assert ("/workers", "Bearer k3y") in Router.seen


def test_a_router_routing_to_every_worker_passes(tmp_path, router):
    rc, output = wait(tmp_path, router, [GOOD, SLOW], [(SLOW, True), (GOOD, True), ("http://other:1", False)])
    assert rc == 0, output[-3000:]
    assert "not taken in" not in output
    assert Router.seen == [("/health", "Bearer k3y"), ("/workers", "Bearer k3y")]


def test_a_router_routing_to_some_workers_passes_and_names_the_others(tmp_path, router):
    """A worker still loading, or on a host that is down, is added when it answers: the run goes on."""
    rc, output = wait(tmp_path, router, [GOOD, SLOW, DEAD], [(GOOD, True), (SLOW, False)])
    assert rc == 0, output[-3000:]
    assert "the router routes to 1 of 3 workers" in output, output[-3000:]
    assert f"not taken in or not healthy after 1 s: {SLOW}, {DEAD}" in output, output[-3000:]


def test_dp_aware_workers_count_by_their_url(tmp_path, router):
    """--dp-aware lists a worker once per data-parallel rank, as URL@RANK."""
    rc, output = wait(tmp_path, router, [GOOD], [(GOOD + "@0", True), (GOOD + "@1", True)])
    assert rc == 0, output[-3000:]
    assert "not taken in" not in output
