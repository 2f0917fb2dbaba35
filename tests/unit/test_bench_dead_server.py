"""`ktinfra bench --duration` against a server that is not there (connection refused): each user pauses
after a request that got no answer, so the run neither spins nor piles up failures, and still reports them."""

from __future__ import annotations

import signal
import socket
import threading
import time

import pytest
from test_bench_http import DONE, USAGE, Server, delta, scenario, sse, whole

from ktinfra import bench


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: a connection to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def dead(port: int) -> bench.Scenario:
    return bench.Scenario(url=f"http://127.0.0.1:{port}", model="m", prompt_tokens=4, gen_tokens=7)


def test_a_duration_run_against_a_dead_server_backs_off_and_reports_the_failures():
    # each user re-sent at once: 2 users x 2 s gave thousands of "connection refused" results
    t0 = time.perf_counter()
    level = bench.run_level(dead(closed_port()), users=2, requests_per_user=None, duration_s=2.0)
    elapsed = time.perf_counter() - t0
    assert 1.9 < elapsed < 2.6  # the pause ends at the deadline, not past it
    # pauses of 0.05, 0.1, 0.2, 0.4, 0.8, 1 s: at most 7 requests a user in 2 s
    assert level["completed"] == 0 and 2 <= level["failed"] <= 16, level["failed"]
    assert len(level["errors"]) == 1 and level["errors"][0].startswith("ConnectionError:"), level["errors"]


def test_http_errors_the_server_answers_get_no_pause(server):
    # paused like a refused connection, 1 s would hold at most 5 requests (after 0.05, 0.1, 0.2, 0.4 s)
    server.reply = lambda h, body: whole(h, b"overloaded", 503)
    level = bench.run_level(scenario(server), users=1, requests_per_user=None, duration_s=1.0)
    assert level["failed"] > 10 and level["errors"] == ["HTTP 503: overloaded"], level["failed"]


def test_a_user_stops_pausing_once_the_server_answers():
    # the server comes up 1 s into the run: the user's next request (at 1.55 s, after pauses of 0.05 to
    # 0.8 s) gets an answer, and from then on it sends back to back
    port = closed_port()
    started: list[Server] = []

    def start() -> None:
        srv = Server(port)
        srv.reply = lambda h, body: sse(h, [delta("a"), USAGE, DONE])
        started.append(srv)

    timer = threading.Timer(1.0, start)
    timer.start()
    try:
        level = bench.run_level(dead(port), users=1, requests_per_user=None, duration_s=3.0)
    finally:
        timer.join()
        for srv in started:
            srv.httpd.shutdown()
            srv.httpd.server_close()
    assert level["completed"] > 20 and 2 <= level["failed"] <= 6, (level["completed"], level["failed"])


def test_ctrl_c_ends_the_pauses_at_once():
    # Ctrl-C in the middle of a 1 s pause: the users end within 0.1 s, not at the end of their pause
    # A run started in the background (`cmd &` in a script, as CI may start it) inherits SIGINT ignored, and
    # python then installs no KeyboardInterrupt handler: install it here, as a terminal's python has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    timer = threading.Timer(2.2, lambda: signal.pthread_kill(main, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            bench.run_level(dead(closed_port()), users=4, requests_per_user=None, duration_s=30.0)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    interrupted = time.perf_counter()
    users = [t for t in threading.enumerate() if t.name.startswith("bench-user-")]
    for user in users:
        user.join(timeout=2.0)
    assert not any(user.is_alive() for user in users)
    assert time.perf_counter() - interrupted < 0.1
