"""A 429/503 reply's Retry-After (RFC 9110 §10.2.3: delta-seconds or an HTTP-date) sets a user's pause,
against a real local server. Before, the runner's own backoff (0.05 s doubling to 1 s) applied whatever the
server asked: a server saying "Retry-After: 2" got 5 requests a second from each user. A value that is too
large (capped at RETRY_AFTER_MAX_S, and a --duration level's deadline ends the pause) or not a delay at all
(ignored: the backoff applies) is reported with the level and on the command line."""

from __future__ import annotations

import json
import time
from email.utils import formatdate

import pytest
from test_bench_http import DONE, USAGE, delta, scenario, sse
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.bench import runner
from ktinfra.bench.retry_after import retry_after_s
from ktinfra.cli import app


def busy(value: str, status: int = 429):
    def reply(h, _body):
        body = b"busy"
        h.send_response(status)
        h.send_header("Retry-After", value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return reply


def busy_once(value: str, status: int = 429):
    """The first request gets `status` with Retry-After `value`, the others an answer."""
    first = busy(value, status)
    seen = []

    def reply(h, body):
        seen.append(1)
        if len(seen) == 1:
            first(h, body)
        else:
            sse(h, [delta("a"), USAGE, DONE])

    return reply


NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("007", 7.0),
        (formatdate(NOW + 30, usegmt=True), 30.0),  # IMF-fixdate
        (formatdate(NOW - 30, usegmt=True), 0.0),  # a date past: retry now
        (time.strftime("%A, %d-%b-%y %H:%M:%S GMT", time.gmtime(NOW + 5)), 5.0),  # RFC 850
        (time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(NOW + 5)), 5.0),  # asctime, no zone: UTC
        ("9" * 5000, 1e12),  # int() of it would raise; it is just huge
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        ("Wed, 99 Foo 2015 07:28:00 GMT", None),
    ],
)
def test_retry_after_values(value, seconds):
    assert retry_after_s(value, now=NOW) == seconds


def test_a_retry_after_longer_than_the_level_holds_each_user_to_one_request(server):
    # "come back in 2 s" to a 1 s level: each of the 2 users sends once; the backoff (0.05, 0.1, 0.2, ...)
    # sent 5 or 6 requests per user
    server.reply = busy("2")
    level = bench.run_level(scenario(server), users=2, requests_per_user=None, duration_s=1.0)
    assert server.requests == 2 and level["failed"] == 2, level
    assert level["retry_after"]["honoured"] == 2 and level["retry_after"]["longest_s"] == 2.0


@pytest.mark.parametrize("status", [429, 503])
def test_the_pause_is_what_the_server_asked(server, status):
    server.reply = busy_once("1", status)
    level = bench.run_level(scenario(server), users=1, requests_per_user=2)
    assert (level["completed"], level["failed"]) == (1, 1)
    assert (level["pauses"], level["paused_s"]) == (1, 1.0), level  # the backoff alone: 0.05 s


def test_an_http_date_is_honoured(server):
    server.reply = busy_once(formatdate(time.time() + 3, usegmt=True))
    level = bench.run_level(scenario(server), users=1, requests_per_user=2)
    assert level["completed"] == 1 and level["retry_after"]["honoured"] == 1
    assert 1.0 <= level["paused_s"] <= 3.5, level  # a date has whole seconds: 2 to 3 s from now


def test_a_huge_retry_after_is_capped_and_reported(server, monkeypatch):
    monkeypatch.setattr(runner, "RETRY_AFTER_MAX_S", 0.3)
    server.reply = busy_once("86400")
    level = bench.run_level(scenario(server), users=1, requests_per_user=2)
    assert level["completed"] == 1 and level["paused_s"] == 0.3, level
    ra = level["retry_after"]
    assert (ra["honoured"], ra["capped"], ra["ignored"], ra["odd_values"]) == (0, 1, 0, ["86400"])


@pytest.mark.parametrize("value", ["99999999999999999999", "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_a_huge_retry_after_does_not_outlast_the_level(server, value):
    server.reply = busy(value)
    level = bench.run_level(scenario(server), users=2, requests_per_user=None, duration_s=1.0)
    assert server.requests == 2 and level["duration_s"] < 30, level  # the 60 s cap, ended by the deadline
    assert level["retry_after"]["capped"] == 2 and level["paused_s"] <= 2.0, level


@pytest.mark.parametrize("value", ["-5", "soon", "1.5"])
def test_a_retry_after_that_is_no_delay_leaves_the_backoff(server, value):
    server.reply = busy_once(value)
    level = bench.run_level(scenario(server), users=1, requests_per_user=2)
    assert level["paused_s"] == runner.BACKOFF_FIRST_S, level
    ra = level["retry_after"]
    assert (ra["honoured"], ra["capped"], ra["ignored"], ra["odd_values"]) == (0, 0, 1, [value])


def test_no_retry_after_no_report(server):
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, DONE])
    level = bench.run_level(scenario(server), users=1, requests_per_user=2)
    assert (level["pauses"], level["paused_s"], level["retry_after"]) == (0, 0.0, None)


def cli(*args: str):
    return CliRunner().invoke(app, ["bench", "--model", "m", *args])


def test_the_command_line_reports_retry_after(server, monkeypatch):
    monkeypatch.setattr(runner, "RETRY_AFTER_MAX_S", 1.5)
    values = iter(["1", "1000", "soon"])
    server.reply = lambda h, body: busy(next(values, "0"))(h, body)
    args = ["--url", server.url, "--users", "1", "--requests", "3"]
    res = cli(*args)
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "the server asked 1 time(s) to retry later (Retry-After, up to 1 s)" in text, text
    assert "Retry-After values the bench did not follow ('1000', 'soon')" in text, text
    values = iter(["1", "1000", "soon"])
    level = json.loads(cli(*args, "--json").output)["levels"][0]
    assert level["retry_after"]["capped"] == 1 and level["retry_after"]["ignored"] == 1, level
