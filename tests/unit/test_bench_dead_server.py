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
from ktinfra.bench import runner


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
    assert time.perf_counter() - t0 >= 2.0  # a user stops only once the deadline has passed
    # pauses of 0.05, 0.1, 0.2, 0.4, 0.8, 1 s: at most 6 requests a user in 2 s (fewer on a slow machine)
    assert level["completed"] == 0 and 1 <= level["failed"] <= 16, level["failed"]
    assert len(level["errors"]) == 1 and level["errors"][0].startswith("ConnectionError:"), level["errors"]


def test_a_pause_ends_at_the_deadline(monkeypatch):
    # a 20 s pause after the first refused request: the 1 s run ends at its deadline, not at the pause's end
    monkeypatch.setattr(runner, "BACKOFF_FIRST_S", 20.0)
    monkeypatch.setattr(runner, "BACKOFF_MAX_S", 20.0)
    t0 = time.perf_counter()
    level = bench.run_level(dead(closed_port()), users=2, requests_per_user=None, duration_s=1.0)
    assert 1.0 <= time.perf_counter() - t0 < 10.0
    assert (level["completed"], level["failed"]) == (0, 2)


def test_client_errors_the_server_answers_get_no_pause(server, monkeypatch):
    # a 400 (the prompt too long, an unknown model) says the server is up: waiting changes nothing. Were it
    # paused like a refused connection (20 s here), 3 requests would take 40 s. (5xx are paused:
    # test_bench_review_backoff.)
    monkeypatch.setattr(runner, "BACKOFF_FIRST_S", 20.0)
    monkeypatch.setattr(runner, "BACKOFF_MAX_S", 20.0)
    server.reply = lambda h, body: whole(h, b"context too long", 400)
    t0 = time.perf_counter()
    level = bench.run_level(scenario(server), users=1, requests_per_user=3)
    assert time.perf_counter() - t0 < 10.0
    assert level["failed"] == 3 and level["errors"] == ["HTTP 400: context too long"], level


@pytest.mark.parametrize("status", [429, 503])
def test_come_back_later_answers_are_paused_like_no_answer(server, monkeypatch, status):
    """Before: 4 users sent 178 requests in 2 s to a server answering 503. With a fixed 0.4 s pause a
    user sends at most 3 requests in 1 s (at 0, 0.4, 0.8 s)."""
    monkeypatch.setattr(runner, "BACKOFF_FIRST_S", 0.4)
    monkeypatch.setattr(runner, "BACKOFF_MAX_S", 0.4)
    server.reply = lambda h, body: whole(h, b"later", status)
    level = bench.run_level(scenario(server), users=2, requests_per_user=None, duration_s=1.0)
    assert level["completed"] == 0
    assert 2 <= level["failed"] <= 6, level


def test_a_user_stops_pausing_once_the_server_answers(monkeypatch):
    # the server comes up after the user's first request was refused: after one pause (0.05 s) the user
    # sends its 8 other requests back to back. Were the pause kept (doubling from 0.1 s) after an answer,
    # they would take 0.1 + 0.2 + ... + 6.4 = 12.7 s.
    monkeypatch.setattr(runner, "BACKOFF_MAX_S", 60.0)
    port = closed_port()
    started: list[Server] = []

    def start_on_first_failure(result) -> None:
        if not started:
            assert not result.answered, result.error
            srv = Server(port)
            srv.reply = lambda h, body: sse(h, [delta("a"), USAGE, DONE])
            started.append(srv)

    t0 = time.perf_counter()
    try:
        level = bench.run_level(dead(port), users=1, requests_per_user=9, on_result=start_on_first_failure)
    finally:
        for srv in started:
            srv.httpd.shutdown()
            srv.httpd.server_close()
    assert time.perf_counter() - t0 < 6.0
    assert (level["completed"], level["failed"]) == (8, 1), level


def test_ctrl_c_ends_the_pauses_at_once(monkeypatch):
    # Ctrl-C while every user is in a 60 s pause: the users end at once, not at the end of their pause
    monkeypatch.setattr(runner, "BACKOFF_FIRST_S", 60.0)
    monkeypatch.setattr(runner, "BACKOFF_MAX_S", 60.0)
    # A run started in the background (`cmd &` in a script, as CI may start it) inherits SIGINT ignored, and
    # python then installs no KeyboardInterrupt handler: install it here, as a terminal's python has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    refused: list[bool] = []
    lock = threading.Lock()
    timer = threading.Timer(0.5, lambda: signal.pthread_kill(main, signal.SIGINT))

    def interrupt_once_all_pause(result) -> None:
        with lock:
            refused.append(not result.answered)
            if len(refused) == 4:  # each user starts its pause right after this: Ctrl-C 0.5 s into it
                timer.start()

    try:
        with pytest.raises(KeyboardInterrupt):
            bench.run_level(
                dead(closed_port()),
                users=4,
                requests_per_user=None,
                duration_s=300.0,
                on_result=interrupt_once_all_pause,
            )
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert refused == [True] * 4  # each user sent one request, then paused until Ctrl-C
    users = [t for t in threading.enumerate() if t.name.startswith("bench-user-")]
    end = time.monotonic() + 20.0
    for user in users:
        user.join(timeout=max(0.0, end - time.monotonic()))
    assert not any(user.is_alive() for user in users)
