"""Under --capacity a request at exactly --min-tps takes --gen-tokens / --min-tps seconds: a --timeout below
that failed requests that met the target (`--capacity --min-tps 1 --gen-tokens 100 --timeout 50`: a request
at 1.5 tok/s, 67 s, timed out at 50 s and failed its level), and the search reported a capacity below the
server's. Such a --timeout is now refused before any request, naming the shortest one; left out, the timeout
of a --capacity run is raised to the target's time where that is above the default 600 s."""

from __future__ import annotations

import json

from test_bench_http import USAGE, delta, sse
from typer.testing import CliRunner

from ktinfra.cli import app


def cli(server, *args: str):
    base = ["bench", "--url", server.url, "--model", "m", "--capacity", "--max-users", "1"]
    return CliRunner().invoke(app, [*base, *args])


def answered(server) -> None:
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, b"data: [DONE]\n\n"])


def test_a_timeout_shorter_than_the_target_time_is_refused_before_any_request(server):
    answered(server)
    res = cli(server, "--min-tps", "1", "--gen-tokens", "100", "--timeout", "50")
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "error: --timeout 50 is shorter than --gen-tokens / --min-tps (100 s" in text, text
    assert "give --timeout 100 or more" in text, text
    assert server.requests == 0


def test_the_suggested_timeout_is_rounded_up(server):
    answered(server)
    res = cli(server, "--min-tps", "3", "--gen-tokens", "100", "--timeout", "33.33")
    text = " ".join(res.output.split())
    assert res.exit_code == 1 and "give --timeout 33.34 or more" in text, text
    res = cli(server, "--min-tps", "3", "--gen-tokens", "100", "--timeout", "33.34", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["scenario"]["timeout_s"] == 33.34


def test_without_timeout_a_long_target_time_raises_it(server):
    answered(server)
    res = cli(server, "--min-tps", "0.1", "--gen-tokens", "100", "--json")  # 1000 s at the target
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["scenario"]["timeout_s"] == 1000.0


def test_without_timeout_a_short_target_time_keeps_the_default(server):
    answered(server)
    res = cli(server, "--min-tps", "20", "--gen-tokens", "100", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["scenario"]["timeout_s"] == 600.0


def test_a_target_time_beyond_the_longest_timeout_is_refused(server):
    res = cli(server, "--min-tps", "0.001", "--gen-tokens", "100")  # 100000 s: more than a day
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "--gen-tokens / --min-tps is 100000 s" in text and "86400" in text, text
    assert server.requests == 0


def test_users_mode_keeps_any_timeout(server):
    answered(server)
    args = ["--url", server.url, "--model", "m", "--users", "1", "--gen-tokens", "100000", "--timeout", "5"]
    res = CliRunner().invoke(app, ["bench", *args, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["scenario"]["timeout_s"] == 5.0
