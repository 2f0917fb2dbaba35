"""The capacity search compared the slowest user's tok/s after rounding it to 2 decimals: a level whose
slowest user got 19.996 tok/s reported min 20.0 and passed `--min-tps 20`. The minimum is now rounded down."""

from __future__ import annotations

import pytest

from ktinfra import bench
from ktinfra.bench.capacity import level_passes


def _level(seconds: float, tokens: int = 100) -> dict:
    done = bench.RequestResult(ok=True, start=0.0, latency_s=seconds, ttft_s=0.1, output_tokens=tokens)
    return bench.summarize([done], concurrency=1, wall_s=seconds)


def test_a_user_just_below_min_tps_fails_the_level():
    level = _level(100 / 19.996)  # 19.996 tok/s
    assert level["user_tps"]["min"] == 19.99
    assert not level_passes(level, 20.0)


@pytest.mark.parametrize(("tps", "shown"), [(20.0, 20.0), (0.29, 0.29), (20.004, 20.0), (7.5, 7.5)])
def test_values_at_or_above_keep_their_two_decimals(tps, shown):
    level = _level(100 / tps)
    assert level["user_tps"]["min"] == shown
    assert level_passes(level, shown)
