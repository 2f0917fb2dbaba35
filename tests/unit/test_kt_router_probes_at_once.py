"""kt_router asks its workers (their own /health in the health wait, /get_model_info of those the router
routes to, and /health then /get_model_info of the given URLs the inventory does not hold) all at once, each
within kt_router_worker_probe_timeout s. Before, one after another with ansible.builtin.uri: N workers that
did not answer held the run N x that timeout (25 s by default), the next one asked only when the one before
had timed out. Real ansible on localhost (-c local) against real HTTP servers that take every request and, on
one path, do not answer; each server records when that request arrived. The three hung requests arriving
within half a timeout of each other is what the test asserts (the play's wall time only goes into the
messages)."""

from __future__ import annotations

import contextlib
import threading
import time
from http.server import ThreadingHTTPServer

from role_play import run_play
from test_kt_router_given_workers_asked import SGLangAuth, sglang_like
from test_kt_router_wait_workers_answer import CHECKS, INTERVAL, Router, router  # noqa: F401 (router: a fixture)

PROBE_TIMEOUT = 3
NOT_YET = "do not answer /health from this host yet"


class Hung(SGLangAuth):
    """An SGLang server without a key that does not answer `hung_path` until the test ends (`release`); it
    records when each request of that path arrived."""

    hung_path = "/health"
    arrived: list
    release: threading.Event

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path != self.hung_path:
            return super().do_GET()
        self.seen.append((self.path, self.headers.get("Authorization")))
        self.arrived.append(time.monotonic())
        self.release.wait(60)  # the client has long given up: nothing is sent


@contextlib.contextmanager
def hung_workers(path: str, count: int = 3):
    """`count` stand-in SGLang servers on 127.0.0.1 that do not answer `path`: [(URL, what it was asked,
    when `path` arrived)]."""
    release = threading.Event()
    servers, workers = [], []
    for _ in range(count):
        seen, arrived = [], []
        given = {"hung_path": path, "seen": seen, "arrived": arrived, "release": release}
        handler = type("Hung", (Hung,), given)
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        workers.append((f"http://127.0.0.1:{server.server_address[1]}", seen, arrived))
    try:
        yield workers
    finally:
        release.set()
        for server in servers:
            server.shutdown()
            server.server_close()


def _play(tmp_path, task_files: tuple[str, ...], extra: dict) -> tuple[int, str, float]:
    role = {"name": "kt_router"}
    tasks = [{"ansible.builtin.include_role": role | {"tasks_from": t}} for t in task_files]
    extra = {"kt_router_worker_probe_timeout": PROBE_TIMEOUT} | INTERVAL | extra
    start = time.monotonic()
    rc, output = run_play(tmp_path, tasks, extra)
    return rc, output, time.monotonic() - start


def _asked_at_once(workers, took: float, output: str) -> None:
    """Each hung worker was asked once, all within half a timeout of the first (one after another, each came
    a whole timeout after the one before)."""
    arrivals = [arrived for _, _, arrived in workers]
    assert all(len(a) == 1 for a in arrivals), (arrivals, output[-3000:])
    firsts = sorted(a[0] for a in arrivals)
    spread = firsts[-1] - firsts[0]
    assert spread < PROBE_TIMEOUT / 2, (
        f"the hung requests arrived {[round(t - firsts[0], 2) for t in firsts]} s after the first (timeout "
        f"{PROBE_TIMEOUT} s; the play took {took:.1f} s)\n{output[-3000:]}"
    )


def test_given_workers_whose_health_hangs_are_asked_at_once_and_named(tmp_path):
    with hung_workers("/health") as workers:
        urls = [url for url, _, _ in workers]
        rc, output, took = _play(tmp_path, ("workers", "given_workers"),
                                 {"kt_router_workers": urls, "kt_router_worker_api_key": ""})  # fmt: skip
    assert rc == 0, output[-3000:]
    _asked_at_once(workers, took, output)
    assert f"{NOT_YET}: {urls[0]} (" in output, output[-3000:]
    assert all(f"{url} (" in output for url in urls), output[-3000:]
    assert all([path for path, _ in seen] == ["/health"] for _, seen, _ in workers)


def test_given_workers_whose_model_info_hangs_are_asked_at_once_with_the_key(tmp_path):
    with hung_workers("/get_model_info") as workers:
        urls = [url for url, _, _ in workers]
        rc, output, took = _play(tmp_path, ("workers", "given_workers"),
                                 {"kt_router_workers": urls, "kt_router_worker_api_key": "k3y"})  # fmt: skip
    assert rc == 0, output[-3000:]
    _asked_at_once(workers, took, output)
    assert NOT_YET not in output and "could not use them" not in output, output[-3000:]
    for _, seen, _ in workers:
        assert seen == [("/health", "Bearer k3y"), ("/get_model_info", "Bearer k3y")]
    assert "k3y" not in output


def test_workers_not_taken_in_whose_health_hangs_are_asked_at_once_and_not_waited_for(tmp_path, router):  # noqa: F811
    with sglang_like("k3y") as (up, _), hung_workers("/health") as workers:
        hung = [url for url, _, _ in workers]
        Router.healthy_from = {up: 1} | dict.fromkeys(hung)
        extra = {"kt_router_host": "127.0.0.1", "kt_router_port": router, "kt_router_health_timeout": 12,
                 "kt_router_worker_api_key": "k3y", "kt_router_workers": [up, *hung]}  # fmt: skip
        rc, output, took = _play(tmp_path, ("workers", "health"), extra)
    assert rc == 0, output[-3000:]
    _asked_at_once(workers, took, output)
    assert Router.workers_asked == CHECKS, output[-3000:]
    said = f"as their own /health did not answer this host within {PROBE_TIMEOUT} s: {hung[0]} ("
    assert said in output and all(f"{url} (" in output for url in hung), output[-3000:]
    assert all(seen == [("/health", None)] for _, seen, _ in workers)


def test_routed_workers_whose_model_info_hangs_are_asked_at_once(tmp_path, router):  # noqa: F811
    """The run goes on as before: no answer is no refusal of the key."""
    with hung_workers("/get_model_info") as workers:
        urls = [url for url, _, _ in workers]
        Router.healthy_from = dict.fromkeys(urls, 1)
        extra = {"kt_router_host": "127.0.0.1", "kt_router_port": router, "kt_router_health_timeout": 12,
                 "kt_router_worker_api_key": "k3y", "kt_router_workers": urls}  # fmt: skip
        rc, output, took = _play(tmp_path, ("workers", "health"), extra)
    assert rc == 0, output[-3000:]
    _asked_at_once(workers, took, output)
    assert Router.workers_asked == 1, output[-3000:]
    assert "refuse its requests" not in output
    assert all(seen == [("/get_model_info", "Bearer k3y")] for _, seen, _ in workers)
