"""The results table showed each level's requests as ok/failed only: a --duration level with requests cut
at the end of its grace (counted neither completed nor failed) read as `3/0`, all fine, and the cut ones
appeared only in a note under the table, summed over all levels. When any level has cut requests, the
column is ok/failed/cut, per level."""

from __future__ import annotations

import io

from rich.console import Console

from ktinfra.commands.bench import _level_table


def _level(users: int, completed: int, failed: int, cut: int) -> dict:
    return {
        "concurrency": users,
        "completed": completed,
        "failed": failed,
        "cut": cut,
        "request_throughput": 1.0,
        "output_throughput": 10.0,
        "user_tps": {"min": 5.0, "median": 6.0},
        "ttft_ms": {"median": 100.0, "p99": 200.0},
        "tpot_ms": {"median": 20.0},
    }


def _rows(levels: list[dict], min_tps: float | None = None) -> list[list[str]]:
    out = io.StringIO()
    Console(file=out, width=200).print(_level_table(levels, min_tps))
    lines = [line.replace("┃", "│") for line in out.getvalue().splitlines()]
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if "│" in line]


def test_cut_requests_get_their_own_count_per_level():
    rows = _rows([_level(1, 2, 0, 0), _level(2, 3, 1, 2)], min_tps=1.0)
    assert rows[0][1] == "ok/failed/cut", rows
    assert [row[1] for row in rows[1:]] == ["2/0/0", "3/1/2"], rows


def test_without_cut_requests_the_column_stays_ok_failed():
    rows = _rows([_level(1, 2, 1, 0)])
    assert rows[0][1] == "ok/failed", rows
    assert rows[1][1] == "2/1", rows
