"""Closed-loop load: N users, each sending requests back to back (the seed 002 scenario, generalized)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ktinfra.bench.client import RequestResult, Scenario, make_prompt, send
from ktinfra.bench.deadline import new_session, start_thread
from ktinfra.bench.metrics import summarize

OnResult = Callable[[RequestResult], None]
# A user's pause after a request the server did not answer (connection refused, no status line), answered 429
# or 5xx, or broke off (an error in the stream, the connection reset mid-reply): RequestResult.retry_later.
# It doubles from the first to the longest over failures in a row: against a dead or broken server each user
# re-sent at once, thousands of failed requests a second for the whole --duration. Each such request counts
# as a failed one; a success, or a client error (400), ends the pause.
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 1.0


def run_level(
    sc: Scenario,
    users: int,
    requests_per_user: int | None = 2,
    duration_s: float | None = None,
    on_result: OnResult | None = None,
    seed: int = 0,
) -> dict:
    """Run one concurrency level; returns its metrics. Either a request count or a duration bounds it."""
    if users < 1:
        raise ValueError("users must be at least 1")
    if (requests_per_user is None) == (duration_s is None):
        raise ValueError("give exactly one of requests_per_user or duration_s")
    if requests_per_user is not None and requests_per_user < 1:
        raise ValueError("requests_per_user must be at least 1")
    results: list[RequestResult] = []
    lock = threading.Lock()
    stop = threading.Event()  # set on Ctrl-C (or a user's crash): no user starts another request
    crashed: list[BaseException] = []
    start = time.perf_counter()
    deadline = start + duration_s if duration_s is not None else None

    def user(index: int) -> None:
        with new_session() as session:
            n, pause = 0, 0.0
            while not stop.is_set():
                if requests_per_user is not None and n >= requests_per_user:
                    return
                if pause:
                    left = pause if deadline is None else max(0.0, deadline - time.perf_counter())
                    if stop.wait(min(pause, left)):  # Ctrl-C ends the pause at once
                        return
                if deadline is not None and time.perf_counter() >= deadline:
                    return
                prompt = make_prompt(sc.prompt_tokens, seed=seed * 1_000_003 + index * 10_007 + n)
                result = send(session, sc, prompt)
                with lock:
                    results.append(result)
                if on_result is not None:
                    on_result(result)
                n += 1
                retry = result.retry_later  # do not hammer a server that is down, overloaded or failing
                pause = min(max(2 * pause, BACKOFF_FIRST_S), BACKOFF_MAX_S) if retry else 0.0

    def guarded(index: int) -> None:
        try:
            user(index)
        except BaseException as exc:  # re-raised below, in the caller's thread
            crashed.append(exc)
            stop.set()

    # Daemon threads, not a ThreadPoolExecutor: on Ctrl-C the caller gets KeyboardInterrupt at once, and the
    # process can exit without waiting for the requests in flight (the executor joins its threads at exit,
    # so an interrupted run went on sending every remaining request, minutes at --gen-tokens 500).
    threads = [
        threading.Thread(target=guarded, args=(i,), name=f"bench-user-{i}", daemon=True) for i in range(users)
    ]
    try:
        for i, thread in enumerate(threads):
            start_thread(thread, f"user {i + 1} of {users}")  # ThreadLimit: the users started stop
        for thread in threads:
            thread.join()
    except BaseException:
        stop.set()
        raise
    if crashed:
        raise crashed[0]
    return summarize(results, users, time.perf_counter() - start)
