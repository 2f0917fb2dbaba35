"""An explicit --grace shorter than --gen-tokens / --min-tps under --capacity cut requests that could
still meet the target, and each cut fails its level: `--capacity --min-tps 1 --gen-tokens 100 --duration 60
--grace 5` searched for minutes and reported a capacity below the server's (a request started 1 s before
the end of the level at 2 tok/s, twice the target, is cut 5 s later). Such a --grace is now refused before
any request, with the shortest one that keeps the criterion; without --grace, --capacity gets that one."""

from __future__ import annotations

import json

from test_bench_http import USAGE, delta, sse
from typer.testing import CliRunner

from ktinfra.cli import app


def cli(*args: str):
    base = ["bench", "--model", "m", "--capacity", "--max-users", "1", "--duration", "0.2"]
    return CliRunner().invoke(app, [*base, *args])


def test_a_grace_too_short_for_the_target_is_refused_before_any_request(server):
    res = cli("--url", server.url, "--min-tps", "1", "--gen-tokens", "100", "--grace", "5")
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "error: --grace 5 is shorter than --gen-tokens / --min-tps (100 s" in text, text
    assert "give --grace 100 or more" in text, text
    assert server.requests == 0


def test_the_suggested_grace_is_accepted_when_the_bound_has_many_decimals(server):
    res = cli("--url", server.url, "--min-tps", "3", "--gen-tokens", "100", "--grace", "33.33")
    text = " ".join(res.output.split())
    assert res.exit_code == 1 and "give --grace 33.34 or more" in text, text
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, b"data: [DONE]\n\n"])
    res = cli("--url", server.url, "--min-tps", "3", "--gen-tokens", "100", "--grace", "33.34", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["scenario"]["grace_s"] == 33.34


def test_a_grace_at_least_the_bound_is_taken(server):
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, b"data: [DONE]\n\n"])
    res = cli("--url", server.url, "--min-tps", "2", "--gen-tokens", "10", "--grace", "5", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["scenario"]["grace_s"] == 5.0


def test_a_timeout_below_the_target_is_refused_whatever_the_grace(server):
    # the grace was once bounded by a shorter --timeout; such a --timeout is now refused itself (review8)
    args = ["--min-tps", "0.1", "--gen-tokens", "100", "--timeout", "20", "--grace", "20"]
    res = cli("--url", server.url, *args)
    text = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert "--timeout 20 is shorter than --gen-tokens / --min-tps (1000 s" in text, text
    assert server.requests == 0
