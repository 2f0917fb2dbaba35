"""A user of the load that stops with an error (the OS refusing its request's deadline timer: ThreadLimit)
ends the level at once, against a real local server. Before, the level waited for every other user's request
in flight to end, up to --timeout (600 s by default), before the error came out; now the others' requests
are abandoned, as on Ctrl-C."""

from __future__ import annotations

import threading

from test_bench_http import scenario
from test_bench_review6_duration_end import stalling

from ktinfra import bench
from ktinfra.bench import deadline


def test_a_refused_timer_ends_the_level_without_waiting_for_the_others(server, monkeypatch):
    server.reply = stalling([], threading.Lock())  # a token every 0.1 s for 30 s
    real_start = deadline.start_thread
    timers = []

    def second_timer_refused(thread, what):
        timers.append(what)
        if len(timers) > 1:
            raise bench.ThreadLimit(what, RuntimeError("can't start new thread"))
        real_start(thread, what)

    monkeypatch.setattr(deadline, "start_thread", second_timer_refused)
    raised: list[BaseException] = []
    sc = scenario(server, timeout_s=25.0)

    def level() -> None:
        try:
            bench.run_level(sc, users=2, requests_per_user=1)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=level, daemon=True)
    thread.start()
    thread.join(timeout=10.0)  # the stalled request of the other user would take its 25 s timeout
    assert len(raised) == 1 and isinstance(raised[0], bench.ThreadLimit), raised
    assert len(timers) == 2
