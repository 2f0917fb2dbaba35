"""A --requests level had no time limit of its own: against a slow server each user's N requests ran one
after the other to their --timeout, N x 600 s per level by default (a --capacity search against a server at
1 tok/s spent 1000 s on one level whose first request had already missed --min-tps 20). --level-timeout bounds
a --requests level: at its end no user starts another request, the requests in flight are cut (counted as
cut, neither completed nor failed) and those never started are counted as not sent; either fails a
--capacity level. With --capacity it defaults to --requests x --gen-tokens / --min-tps plus GRACE_S, the
longest a level that meets the target can take; a shorter one given is refused before any request."""

from __future__ import annotations

import json
import threading

from test_bench_http import USAGE, delta, scenario, sse
from test_bench_review6_duration_end import stalling
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.bench import runner
from ktinfra.cli import app


def run(*args: str):
    return CliRunner().invoke(app, ["bench", "--model", "m", *args])


def answered(server) -> None:
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, b"data: [DONE]\n\n"])


def test_a_requests_level_ends_at_its_time_limit(server):
    server.reply = stalling([], threading.Lock())  # a token every 0.1 s for 30 s
    sc = scenario(server, timeout_s=20.0)
    level = bench.run_level(sc, users=2, requests_per_user=3, time_limit_s=0.5)
    assert (level["completed"], level["failed"], level["cut"], level["not_sent"]) == (0, 0, 2, 4), level
    assert level["errors"] == [] and server.requests == 2, level
    assert not bench.level_passes({**level, "cut": 0, "user_tps": {"min": 9.0}, "completed": 1}, 1.0)


def test_a_level_that_finishes_in_time_sends_everything(server):
    answered(server)
    level = bench.run_level(scenario(server), users=2, requests_per_user=2, time_limit_s=60.0)
    assert (level["completed"], level["cut"], level["not_sent"]) == (4, 0, 0), level
    assert bench.level_passes(level, min_tps=1.0)


def test_level_timeout_on_the_command_line(server):
    server.reply = stalling([], threading.Lock())
    args = ["--url", server.url, "--users", "1", "--requests", "2", "--timeout", "20"]
    args += ["--level-timeout", "0.5"]
    res = run(*args, "--json")
    assert res.exit_code == 1, res.output  # nothing completed
    result = json.loads(res.stdout)
    assert result["scenario"]["level_timeout_s"] == 0.5
    (level,) = result["levels"]
    assert (level["completed"], level["failed"], level["cut"], level["not_sent"]) == (0, 0, 1, 1), level
    res = run(*args)  # the table's note names the limit (it formatted the --duration grace, None here)
    text = " ".join(res.output.split())
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "1 request(s) still running at the level's time limit (--level-timeout 0.5 s) were cut" in text
    assert "1 not sent" in text, text


def test_a_capacity_level_is_bounded_by_default(server, monkeypatch):
    monkeypatch.setattr(runner, "GRACE_S", 0.3)
    server.reply = stalling([], threading.Lock())
    args = ["--url", server.url, "--capacity", "--min-tps", "10", "--gen-tokens", "5", "--max-users", "1"]
    res = run(*args, "--timeout", "20", "--json")
    result = json.loads(res.stdout)
    assert result["scenario"]["level_timeout_s"] == 1.3  # 2 requests x 0.5 s at the target, + GRACE_S
    (level,) = result["levels"]
    assert (level["cut"], level["not_sent"], level["pass"], result["capacity"]) == (1, 1, False, 0), level


def test_a_level_timeout_too_short_for_the_target_is_refused(server):
    args = ["--url", server.url, "--capacity", "--min-tps", "1", "--gen-tokens", "100", "--requests", "3"]
    res = run(*args, "--level-timeout", "200")
    text = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert "--level-timeout 200 is shorter than --requests x --gen-tokens / --min-tps (300 s" in text, text
    assert server.requests == 0


def test_level_timeout_is_for_requests_levels(server):
    res = run("--url", server.url, "--users", "1", "--duration", "1", "--level-timeout", "5")
    assert res.exit_code == 1 and "--duration" in res.output and "--level-timeout" in res.output, res.output
    assert server.requests == 0
    res = run("--url", server.url, "--users", "1", "--level-timeout", "0")
    assert res.exit_code != 0 and server.requests == 0, res.output
