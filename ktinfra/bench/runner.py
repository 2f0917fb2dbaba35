"""Closed-loop load: N users, each sending requests back to back (the seed 002 scenario, generalized)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ktinfra.bench.client import RequestResult, Scenario, make_prompt, send
from ktinfra.bench.deadline import new_session, start_thread
from ktinfra.bench.metrics import summarize
from ktinfra.bench.retry_after import RETRY_AFTER_MAX_S, retry_after_s, shown

OnResult = Callable[[RequestResult], None]
# A user's pause after a request the server did not answer (connection refused, no status line), answered 429
# or 5xx, or broke off (an error in the stream, the connection reset mid-reply): RequestResult.retry_later.
# It doubles from the first to the longest over failures in a row: against a dead or broken server each user
# re-sent at once, thousands of failed requests a second for the whole --duration. Each such request counts
# as a failed one; a success, or a client error (400), ends the pause.
# A reply's Retry-After (429, 503) makes the pause at least what it asks, up to RETRY_AFTER_MAX_S or
# --timeout, whichever is less (no pause is longer than a request may take: "Retry-After: 60" held a
# --requests 100 level's users 99 minutes at --timeout 5); one that is not a delay (garbage, negative) leaves
# the backoff as it is. Both kinds are reported with the level.
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 1.0
# When a --duration level ends, no user starts another request, and those in flight get this long to finish
# (k6's gracefulStop, 30 s by default); what still runs then is cut and counted apart, neither completed nor
# failed. Before, they ran to their --timeout: a 60 s level took 60 s + 600 s against a stuck server.
GRACE_S = 30.0


class _Pauses:
    """What a level's users paused, and the Retry-After values they were sent: the level's report."""

    def __init__(self, timeout_s: float) -> None:
        self.longest_allowed_s = min(RETRY_AFTER_MAX_S, timeout_s)
        self.lock = threading.Lock()
        self.count, self.total_s = 0, 0.0
        self.honoured, self.longest_s, self.capped, self.ignored = 0, 0.0, 0, 0
        self.odd: set[str] = set()  # the values capped or ignored, as sent

    def next_pause(self, result: RequestResult, backoff: float) -> float:
        """The pause before the user's next request, `backoff` being its own."""
        if not result.retry_later or result.retry_after is None:
            return backoff
        asked = retry_after_s(result.retry_after)
        with self.lock:
            if asked is None:
                self.ignored += 1
            elif asked > self.longest_allowed_s:
                self.capped += 1
            else:
                self.honoured += 1
                self.longest_s = max(self.longest_s, asked)
            if asked is None or asked > self.longest_allowed_s:
                self.odd.add(shown(result.retry_after))
        return backoff if asked is None else max(backoff, min(asked, self.longest_allowed_s))

    def paused(self, seconds: float) -> None:
        with self.lock:
            self.count += 1
            self.total_s += seconds

    def report(self) -> dict:
        seen = self.honoured + self.capped + self.ignored
        return {
            "pauses": self.count,
            "paused_s": round(self.total_s, 3),
            "retry_after": {
                "honoured": self.honoured,
                "longest_s": round(self.longest_s, 3),
                "capped": self.capped,  # asked more than max_s: paused that long
                "max_s": self.longest_allowed_s,  # RETRY_AFTER_MAX_S, or the request timeout if less
                "ignored": self.ignored,  # not a delay: the backoff applied
                "odd_values": sorted(self.odd)[:5],
            }
            if seen
            else None,
        }


def prompt_seed(level_seed: int, user: int, n: int) -> str:
    """The seed of a user's n-th prompt: one per (level, user, request), none shared. The sum it was
    (level_seed * 1_000_003 + user * 10_007 + n) gave user 0's request 10007 user 1's first prompt, and a
    level's user 0 request 697 the prompt of user 100's first in the level seeded one below: the server's
    prefix cache answered those."""
    return f"{level_seed}:{user}:{n}"


def run_level(
    sc: Scenario,
    users: int,
    requests_per_user: int | None = 2,
    duration_s: float | None = None,
    on_result: OnResult | None = None,
    seed: int = 0,
    grace_s: float | None = None,
    time_limit_s: float | None = None,
) -> dict:
    """Run one concurrency level; returns its metrics. Either a request count or a duration bounds it;
    a duration's requests in flight at its end get `grace_s` (default GRACE_S) more, then are cut. A request
    count's level may have a `time_limit_s`: then no user starts another request, those in flight are cut and
    the rest counted as not sent."""
    if users < 1:
        raise ValueError("users must be at least 1")
    if (requests_per_user is None) == (duration_s is None):
        raise ValueError("give exactly one of requests_per_user or duration_s")
    if requests_per_user is not None and requests_per_user < 1:
        raise ValueError("requests_per_user must be at least 1")
    if grace_s is not None and (duration_s is None or not grace_s >= 0):
        raise ValueError("grace_s is for a duration level, and at least 0")
    if time_limit_s is not None and (requests_per_user is None or not time_limit_s > 0):
        raise ValueError("time_limit_s is for a level of a request count, and above 0")
    if grace_s is None:
        grace_s = GRACE_S
    results: list[RequestResult] = []
    lock = threading.Lock()
    stop = threading.Event()  # set on Ctrl-C (or a user's crash): no user starts another request
    crashed: list[BaseException] = []
    pauses = _Pauses(sc.timeout_s)
    start = time.perf_counter()
    if duration_s is not None:
        deadline = start + duration_s
        cut_at = deadline + grace_s
    else:  # a request count's time limit is a hard end: no grace
        deadline = cut_at = start + time_limit_s if time_limit_s is not None else None

    def user(index: int) -> None:
        with new_session() as session:
            n, backoff, pause = 0, 0.0, 0.0
            while not stop.is_set():
                if requests_per_user is not None and n >= requests_per_user:
                    return
                if pause:
                    left = pause if deadline is None else max(0.0, deadline - time.perf_counter())
                    wait = min(pause, left)  # a --duration level's deadline ends any pause
                    if wait:
                        pauses.paused(wait)
                    if stop.wait(wait):  # Ctrl-C ends the pause at once
                        return
                if deadline is not None and time.perf_counter() >= deadline:
                    return
                prompt = make_prompt(sc.prompt_tokens, seed=prompt_seed(seed, index, n))
                result = send(session, sc, prompt, cut_at=cut_at)
                with lock:
                    results.append(result)
                if on_result is not None:
                    on_result(result)
                n += 1
                retry = result.retry_later  # do not hammer a server that is down, overloaded or failing
                backoff = min(max(2 * backoff, BACKOFF_FIRST_S), BACKOFF_MAX_S) if retry else 0.0
                pause = pauses.next_pause(result, backoff)

    running = [users]
    ended = threading.Event()  # every user returned, or one crashed

    def guarded(index: int) -> None:
        try:
            user(index)
        except BaseException as exc:  # re-raised below, in the caller's thread
            crashed.append(exc)
            stop.set()
            ended.set()  # at once: the other users' requests in flight are abandoned, as on Ctrl-C
        finally:
            with lock:
                running[0] -= 1
                if not running[0]:
                    ended.set()

    # Daemon threads, not a ThreadPoolExecutor: on Ctrl-C the caller gets KeyboardInterrupt at once, and the
    # process can exit without waiting for the requests in flight (the executor joins its threads at exit,
    # so an interrupted run went on sending every remaining request, minutes at --gen-tokens 500).
    threads = [
        threading.Thread(target=guarded, args=(i,), name=f"bench-user-{i}", daemon=True) for i in range(users)
    ]
    try:
        for i, thread in enumerate(threads):
            start_thread(thread, f"user {i + 1} of {users}")  # ThreadLimit: the users started stop
        # not a join of each thread: a user that crashed (the OS refusing its request's deadline timer) ended
        # the level only once every other user's request in flight had ended, up to --timeout later
        ended.wait()
    except BaseException:
        stop.set()
        raise
    if crashed:
        raise crashed[0]
    summary = summarize(results, users, time.perf_counter() - start)
    # never started: the level's time limit ran out first (each user stops between requests only so)
    summary["not_sent"] = users * requests_per_user - len(results) if requests_per_user is not None else 0
    return summary | pauses.report()
