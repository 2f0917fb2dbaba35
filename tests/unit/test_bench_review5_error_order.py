"""A level's errors were the first 5 by text: 5 rare errors whose text sorts first ("HTTP 500: ...") hid the
error that failed most of the level ("timed out ..."), from --json and from the table's "failed requests"
line, and no count said which was which. They now come most frequent first, with error_counts (and the
table's "(xN)"), and other_errors counts the failed requests whose error is not shown."""

from __future__ import annotations

import json

from test_bench_http import whole
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.bench.client import RequestResult
from ktinfra.cli import app


def failed(error: str) -> RequestResult:
    return RequestResult(ok=False, start=0.0, latency_s=1.0, error=error, answered=True)


def test_the_most_frequent_error_comes_first_and_is_counted():
    rare = [failed(f"HTTP 500: request {i} failed") for i in range(6)]
    level = bench.summarize(rare + [failed("timed out after 1 s")] * 90, concurrency=8, wall_s=10.0)
    assert level["errors"][0] == "timed out after 1 s", level["errors"]
    assert level["error_counts"] == [90, 1, 1, 1, 1]
    assert level["other_errors"] == 2  # 2 of the rare ones are left out


def test_the_table_shows_the_counts(server):
    seen = []

    def reply(h, _body):
        seen.append(1)
        if len(seen) == 1:
            whole(h, b"a rare one", 400)
        else:
            whole(h, b"too long", 422)

    server.reply = reply
    args = ["bench", "--model", "m", "--url", server.url, "--users", "1", "--requests", "3"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "failed requests: HTTP 422: too long (x2); HTTP 400: a rare one (x1)" in text, text
    seen.clear()
    level = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)["levels"][0]
    assert (level["errors"], level["error_counts"], level["other_errors"]) == (
        ["HTTP 422: too long", "HTTP 400: a rare one"],
        [2, 1],
        0,
    )
