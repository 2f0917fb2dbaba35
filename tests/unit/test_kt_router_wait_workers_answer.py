"""kt_router's wait for its workers and what the workers themselves answer, run by real ansible on localhost
(-c local) against a stand-in router answering /health and /workers as sglang-router 0.3.2 does (as in
test_router_review3_workers_wait.py) and stand-in SGLang servers (test_kt_router_given_workers_asked.py).
Before: the wait asked only the router, which tries a worker that does not answer for 7 days, so a worker
that was down held the run for the whole kt_router_health_timeout; and a worker whose api_key was not the
router's was listed healthy (its /health needs no key; probed with the real 0.3.2: is_healthy true) and the
run ended green while it answered every request the router forwarded with 401."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from role_play import run_play
from test_kt_router_given_workers_asked import nothing_listens, sglang_like

CHECKS = 4  # kt_router__workers_checks: the router's /workers asked before the workers' own /health
# kt_router__check_interval: 1 s between the wait's checks, not the role's 5: the same checks in a fifth of
# the time (each timeout below is a fifth of the seconds a host would wait for as many checks)
INTERVAL = {"kt_router__check_interval": 1}


class Router(BaseHTTPRequestHandler):
    """sglang-router's /health (200 with no worker) and /workers, behind the key k3y. `healthy_from`: worker
    URL -> the /workers request (1, 2, ...) from which it is listed healthy (None: listed, never healthy)."""

    healthy_from: dict = {}
    workers_asked = 0

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.headers.get("Authorization") != "Bearer k3y":
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"OK"
        if self.path == "/workers":
            Router.workers_asked += 1
            listed = [{"url": url, "is_healthy": Router.workers_asked >= (self.healthy_from[url] or 10**9),
                       "worker_type": "regular"} for url in self.healthy_from]  # fmt: skip
            body = json.dumps({"workers": listed, "total": len(listed)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if self.path == "/workers" else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def router():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Router)
    Router.workers_asked = 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def wait(tmp_path, port, healthy_from: dict, timeout: int = 12):
    """The role's worker list (each URL of `healthy_from`) and its health wait against the stand-in router,
    1 s between checks (INTERVAL)."""
    Router.healthy_from = healthy_from
    extra = {"kt_router_host": "127.0.0.1", "kt_router_port": port, "kt_router_health_timeout": timeout,
             "kt_router_wait_health": True, "kt_router_worker_api_key": "k3y",
             "kt_router_worker_probe_timeout": 3, "kt_router_workers": list(healthy_from),
             **INTERVAL}  # fmt: skip
    role = {"name": "kt_router"}
    tasks = [{"ansible.builtin.include_role": role | {"tasks_from": t}} for t in ("workers", "health")]
    return run_play(tmp_path, tasks, extra)


def test_with_no_worker_routed_a_refused_connection_is_waited_for_and_named(tmp_path, router):
    """A worker still loading its model refuses connections as a dead one does (SGLang listens once the model
    is in): with none routed the wait runs its timeout (4 s), then names it with why."""
    dead = nothing_listens()
    rc, output = wait(tmp_path, router, {dead: None}, timeout=4)
    assert rc != 0, output[-3000:]
    assert Router.workers_asked == 6, output[-3000:]  # 4, then 2 more: 4 s of 1 s delays
    assert "has no healthy worker after 4 s" in output, output[-3000:]
    said = f"did not answer this host within 3 s when asked after the first checks: {dead} ("
    assert said in output and "Connection refused" in output, output[-3000:]
    assert "k3y" not in output


# slow: the same none-routed wait in health.yml as
# test_with_no_worker_routed_a_refused_connection_is_waited_for_and_named
@pytest.mark.slow
def test_a_lone_worker_that_comes_up_after_the_first_checks_passes(tmp_path, router):
    """Before (e4ea906): its refused /health after 15 s failed the run while the worker was loading its
    model; the router lists it healthy at its 6th check."""
    loading = nothing_listens()
    rc, output = wait(tmp_path, router, {loading: 6})
    assert rc == 0, output[-3000:]
    assert Router.workers_asked == 6, output[-3000:]


# slow: the same {up, dead} wait and "routes to 1 of 2" line as
# test_kt_router_wait_no_error_line.py::test_a_worker_wait_that_runs_out_and_goes_on_prints_no_error
@pytest.mark.slow
def test_the_others_go_on_when_one_worker_refuses_connections(tmp_path, router):
    """A down host does not fail the run when the router routes to another worker; it is named."""
    dead = nothing_listens()
    with sglang_like("k3y") as (up, _):
        rc, output = wait(tmp_path, router, {up: 1, dead: None})
    assert rc == 0, output[-3000:]
    assert Router.workers_asked == CHECKS
    assert f"the router routes to 1 of 2 workers; not taken in or not healthy after 3 s: {dead}" in output
    assert f"not waited for, as their own /health did not answer this host within 3 s: {dead}" in output


def test_a_worker_that_answers_is_waited_for_after_the_first_checks(tmp_path, router):
    """One the router has not taken in yet but that answers its /health is waited for, as before."""
    with sglang_like("k3y") as (slow, _):
        rc, output = wait(tmp_path, router, {slow: CHECKS + 2})
    assert rc == 0, output[-3000:]
    assert Router.workers_asked == CHECKS + 2
    assert "not taken in" not in output and "not waited for" not in output


def test_a_healthy_listed_worker_that_refuses_the_routers_key_fails_the_run_naming_it(tmp_path, router):
    with sglang_like("its-own") as (other, seen), sglang_like("k3y") as (same, _):
        rc, output = wait(tmp_path, router, {same: 1, other: 1})
    assert rc != 0, output[-3000:]
    named = f"the router lists these workers as healthy, but they refuse its requests: {other} answered 401"
    assert named in output, output[-3000:]
    assert f"{same} answered" not in output
    assert ("/get_model_info", "Bearer k3y") in seen
    assert "k3y" not in output and "its-own" not in output


def test_healthy_workers_that_take_the_routers_key_pass(tmp_path, router):
    with sglang_like("k3y") as (same, seen), sglang_like(None) as (keyless, _):
        rc, output = wait(tmp_path, router, {same: 1, keyless: 1})
    assert rc == 0, output[-3000:]
    assert seen == [("/get_model_info", "Bearer k3y")]
    assert Router.workers_asked == 1
