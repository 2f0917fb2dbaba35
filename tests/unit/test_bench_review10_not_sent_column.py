"""Requests a --level-timeout left unsent (`not_sent`, counted neither completed nor failed) were in --json
and summed in a note under the table, but the table's column was ok/failed (or ok/failed/cut): a level
whose limit ran out with 2 of its 4 requests never sent read `2/0`. When any level has unsent requests the
column counts them too, per level, as it does cut ones."""

from __future__ import annotations

import threading

from test_bench_review6_duration_end import stalling
from test_bench_review7_cut_column import _level, _rows
from typer.testing import CliRunner

from ktinfra.cli import app


def _limited(users: int, completed: int, failed: int, cut: int, not_sent: int) -> dict:
    return {**_level(users, completed, failed, cut), "not_sent": not_sent}


def test_unsent_requests_get_their_own_count_per_level():
    rows = _rows([_limited(1, 4, 0, 0, 0), _limited(2, 3, 0, 2, 3)], min_tps=1.0)
    assert rows[0][1] == "ok/failed/cut/not sent", rows
    assert [row[1] for row in rows[1:]] == ["4/0/0/0", "3/0/2/3"], rows


def test_unsent_requests_without_cut_ones():
    rows = _rows([_limited(1, 2, 0, 0, 2)])
    assert rows[0][1] == "ok/failed/not sent", rows
    assert rows[1][1] == "2/0/2", rows


def test_a_level_run_for_a_duration_has_no_unsent_column():
    rows = _rows([_limited(1, 2, 1, 1, 0)])
    assert rows[0][1] == "ok/failed/cut", rows
    assert rows[1][1] == "2/1/1", rows


def test_the_table_of_a_level_cut_by_its_time_limit(server):
    server.reply = stalling([], threading.Lock())  # a token every 0.1 s for 30 s
    args = ["bench", "--model", "m", "--url", server.url, "--users", "1", "--requests", "2"]
    args += ["--timeout", "20", "--level-timeout", "0.5"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output  # nothing completed
    header, row = (line for line in res.output.splitlines() if "│" in line or "┃" in line)
    assert header.replace("┃", "│").split("│")[2].strip() == "ok/failed/cut/not sent", res.output
    assert row.split("│")[2].strip() == "0/0/1/1", res.output
