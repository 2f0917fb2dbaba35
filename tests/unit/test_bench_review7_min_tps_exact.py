"""The capacity search compared --min-tps with the slowest user's tok/s rounded down to 2 decimals: a target
with a third decimal, or below 0.01, failed users who met it (19.998 tok/s counted as 19.99 against
--min-tps 19.995; 0.008 as 0.0 against 0.001). The unrounded minimum is compared now; `min` stays rounded
down for the table and JSON, and `min_exact` carries the compared value."""

from __future__ import annotations

import pytest

from ktinfra import bench
from ktinfra.bench.capacity import level_passes


def _level(tps: float, tokens: int = 100) -> dict:
    seconds = tokens / tps
    done = bench.RequestResult(ok=True, start=0.0, latency_s=seconds, ttft_s=0.1, output_tokens=tokens)
    return bench.summarize([done], concurrency=1, wall_s=seconds)


@pytest.mark.parametrize(("tps", "target"), [(19.998, 19.995), (0.008, 0.001), (20.0, 20.0), (5.0051, 5.005)])
def test_a_user_who_met_a_finer_target_passes(tps, target):
    assert level_passes(_level(tps), target)


@pytest.mark.parametrize(("tps", "target"), [(19.994, 19.995), (0.0009, 0.001), (19.996, 20.0)])
def test_a_user_below_a_finer_target_fails(tps, target):
    assert not level_passes(_level(tps), target)


def test_the_shown_minimum_stays_rounded_down_and_the_exact_one_is_recorded():
    tps = _level(19.998)["user_tps"]
    assert tps["min"] == 19.99
    assert tps["min_exact"] == pytest.approx(19.998)


def test_the_search_counts_a_level_that_met_a_finer_target():
    result = bench.search(lambda users: _level(19.998), min_tps=19.995, max_users=2)
    assert result["capacity"] == 2 and all(lv["pass"] for lv in result["levels"])
