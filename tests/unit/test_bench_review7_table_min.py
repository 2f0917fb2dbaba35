"""The table showed the slowest user's tok/s with one decimal, rounded half up from the 2-decimal minimum:
a --capacity level whose slowest user got 19.996 tok/s showed `20.0` beside `no` under `>= 20 tok/s`, and
one at 19.998 that met --min-tps 19.995 showed `20.0` too. The minimum is now shown rounded down, with as
many decimals as --min-tps has (at least one)."""

from __future__ import annotations

import io
import math

import pytest
from rich.console import Console

from ktinfra.commands.bench import _level_table


def _cells(exact: float, min_tps: float | None, passed: bool) -> list[str]:
    shown = math.floor(exact * 100 + 1e-9) / 100 if math.isfinite(exact) else exact  # as summarize rounds
    level = {
        "concurrency": 1,
        "completed": 1,
        "failed": 0,
        "cut": 0,
        "request_throughput": 1.0,
        "output_throughput": 10.0,
        "user_tps": {"min": shown, "min_exact": exact, "median": 30.0},
        "ttft_ms": None,
        "tpot_ms": None,
        "pass": passed,
    }
    out = io.StringIO()
    Console(file=out, width=200).print(_level_table([level], min_tps))
    row = [line for line in out.getvalue().splitlines() if line.startswith("│")][0]
    return [cell.strip() for cell in row.split("│")[1:-1]]


@pytest.mark.parametrize(
    ("exact", "min_tps", "passed", "shown"),
    [
        (19.996, 20.0, False, "19.9/30.0"),
        (19.998, 19.995, True, "19.998/30.0"),
        (0.0089, 0.001, True, "0.008/30.0"),
        (20.0, 20.0, True, "20.0/30.0"),
        (0.29, 0.29, True, "0.29/30.0"),
        (19.996, None, False, "19.9/30.0"),
        (math.inf, None, False, "inf/30.0"),
    ],
)
def test_the_slowest_user_is_shown_rounded_down_to_the_target_s_decimals(exact, min_tps, passed, shown):
    cells = _cells(exact, min_tps, passed)
    assert cells[4] == shown, cells
    if min_tps is not None:
        assert cells[-1] == ("yes" if passed else "no"), cells
