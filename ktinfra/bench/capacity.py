"""Capacity search: the largest concurrency at which every user still gets at least X output tok/s."""

from __future__ import annotations

import math
from collections.abc import Callable

from ktinfra.bench.metrics import slowest_user_tps

CRITERION = (
    "every request of the level completed (none failed, none cut at the end of a --duration level or at a "
    "--requests level's time limit, none left unsent by that limit) and the slowest one got >= min_tps "
    "output tok/s (end to end)"
)


def level_passes(level: dict, min_tps: float) -> bool:
    """A request cut at the end of a --duration level fails it: it is the slowest of the level (it ran from
    before the deadline to the end of the grace and did not finish), and left out it let a level pass whose
    other users were fast enough. So does a request a --requests level's time limit left unsent."""
    tps = level.get("user_tps")
    return (
        level["failed"] == 0
        and level.get("cut", 0) == 0
        and level.get("not_sent", 0) == 0
        and level["completed"] > 0
        and tps is not None
        and slowest_user_tps(tps) >= min_tps
    )


def search(
    run_level: Callable[[int], dict],
    min_tps: float,
    max_users: int = 64,
    on_level: Callable[[dict], None] | None = None,
) -> dict:
    """Double the concurrency until a level fails (or max_users), then bisect between the last pass and fail.

    Assumes per-user speed falls as concurrency rises, which holds for a server at steady load.
    """
    if not math.isfinite(min_tps) or min_tps <= 0:
        raise ValueError("min_tps must be a finite number above 0")
    if max_users < 1:
        raise ValueError("max_users must be at least 1")
    levels: dict[int, dict] = {}

    def probe(users: int) -> bool:
        level = run_level(users)
        level["pass"] = level_passes(level, min_tps)
        levels[users] = level
        if on_level is not None:
            on_level(level)
        return level["pass"]

    good, bad, users = 0, None, 1
    while users <= max_users:
        if probe(users):
            good = users
            if users == max_users:
                break
            users = min(users * 2, max_users)
        else:
            bad = users
            break
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        if probe(mid):
            good = mid
        else:
            bad = mid
    return {
        "min_tps": min_tps,
        "capacity": good,
        "first_failing": bad,
        "limited_by_max_users": bad is None,
        "criterion": CRITERION,
        "levels": [levels[k] for k in sorted(levels)],
    }
