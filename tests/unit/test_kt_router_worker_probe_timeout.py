"""kt_router asks workers for their own /health (the health wait, and the given URLs the inventory does not
hold) within kt_router_worker_probe_timeout s. Before, within kt_router_health_check_timeout (5 s, the
router's own check): SGLang's /health generates one token and answers when the scheduler does, waiting up to
SGLANG_HEALTH_CHECK_TIMEOUT (20 s; http_server.py health_generate), so a busy worker taking 7 s was taken for
one that does not answer: not waited for, or named as not answering. Real ansible on localhost (-c local)
against the stand-in router of test_kt_router_wait_workers_answer and stand-in SGLang servers whose /health
answers late."""

from __future__ import annotations

import contextlib
import threading
import time
from http.server import ThreadingHTTPServer

from role_play import run_play
from test_kt_router_given_workers_asked import SGLangAuth, sglang_like
from test_kt_router_role import _refused_before_any_change
from test_kt_router_wait_workers_answer import CHECKS, Router, router  # noqa: F401 (router: a fixture)

NOT_YET = "do not answer /health from this host yet"


class LateHealth(SGLangAuth):
    """An SGLang server without a key whose /health answers after `delay` s."""

    delay = 0.0

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path != "/health":
            return super().do_GET()
        self.seen.append((self.path, self.headers.get("Authorization")))  # when asked, not when answered
        time.sleep(self.delay)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


@contextlib.contextmanager
def late_health(delay: float):
    """A stand-in SGLang server on 127.0.0.1 whose /health answers after `delay` s: (its URL, what it was
    asked)."""
    seen: list = []
    handler = type("Busy", (LateHealth,), {"delay": delay, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _role(tmp_path, task_files: tuple[str, ...], extra: dict):
    role = {"name": "kt_router"}
    tasks = [{"ansible.builtin.include_role": role | {"tasks_from": t}} for t in task_files]
    return run_play(tmp_path, tasks, extra)


def test_a_busy_worker_whose_health_answers_in_7_s_is_waited_for(tmp_path, router):  # noqa: F811
    """The router lists it healthy at its 6th check; its own /health, asked after the 4th, takes 7 s."""
    with sglang_like(None) as (up, _), late_health(7) as (busy, seen):
        Router.healthy_from = {up: 1, busy: CHECKS + 2}
        extra = {"kt_router_host": "127.0.0.1", "kt_router_port": router, "kt_router_health_timeout": 60,
                 "kt_router_worker_api_key": "k3y", "kt_router_workers": [up, busy]}  # fmt: skip
        rc, output = _role(tmp_path, ("workers", "health"), extra)
    assert rc == 0, output[-3000:]
    assert ("/health", None) in seen, output[-3000:]
    assert Router.workers_asked == CHECKS + 2, output[-3000:]
    assert "not waited for" not in output and "not taken in" not in output, output[-3000:]


def test_a_given_worker_whose_health_answers_in_7_s_is_not_named_as_silent(tmp_path):
    with late_health(7) as (busy, seen):
        extra = {"kt_router_workers": [busy], "kt_router_worker_api_key": ""}
        rc, output = _role(tmp_path, ("workers", "given_workers"), extra)
    assert rc == 0, output[-3000:]
    assert NOT_YET not in output, output[-3000:]
    assert [path for path, _ in seen] == ["/health", "/get_model_info"]


def test_a_given_worker_whose_health_does_not_answer_is_not_asked_again(tmp_path):
    """It is named, not asked for /get_model_info (another kt_router_worker_probe_timeout s for nothing)."""
    with late_health(8) as (hung, seen):
        extra = {"kt_router_workers": [hung], "kt_router_worker_api_key": "",
                 "kt_router_worker_probe_timeout": 3}  # fmt: skip
        rc, output = _role(tmp_path, ("workers", "given_workers"), extra)
    assert rc == 0, output[-3000:]
    assert f"{NOT_YET}: {hung} (" in output, output[-3000:]
    assert [path for path, _ in seen] == ["/health"]


def test_a_probe_timeout_below_1_is_refused_before_any_change(tmp_path):
    fresh, extra = _refused_before_any_change(tmp_path)
    extra["kt_router_worker_probe_timeout"] = 0
    rc, output = run_play(tmp_path, [{"ansible.builtin.include_role": {"name": "kt_router"}}], extra)
    assert rc != 0
    assert "kt_router_worker_probe_timeout must be at least 1 (seconds), not 0" in output, output[-3000:]
    assert "Make the router's virtual environment" not in output
    assert not fresh.exists()
