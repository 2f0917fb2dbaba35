"""A 200 that is not the API's reply (a proxy's HTML page, JSON without choices, an empty event stream)
fails the request the same way every time: --url or --api points at something else. Such a request now
pauses its user like a server error (the bounded backoff), and the report says what the cause likely is.
Before, every user re-sent at once: 2 users sent hundreds of requests in 1 s to a server answering an HTML
page. A JSON reply without 'choices' (--no-stream) also failed only as "server returned no tokens"."""

from __future__ import annotations

import json

import pytest
import requests
from test_bench_http import scenario, sse, whole
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.bench import runner
from ktinfra.bench.client import send
from ktinfra.cli import app


def html(h, _body):
    page = b"<html><body>Welcome to nginx!</body></html>"
    h.send_response(200)
    h.send_header("Content-Type", "text/html")
    h.send_header("Content-Length", str(len(page)))
    h.end_headers()
    h.wfile.write(page)


REPLIES = {
    "html page": (html, {}),
    "html page, no stream": (html, {"stream": False}),
    "json without choices": (lambda h, body: whole(h, b'{"status": "ok"}'), {"stream": False}),
    "json without text (/generate)": (
        lambda h, body: whole(h, b'{"ok": 1}'),
        {"stream": False, "api": "sglang"},
    ),
    "empty event stream": (lambda h, body: sse(h, []), {}),
}


@pytest.mark.parametrize("kind", list(REPLIES))
def test_a_reply_of_the_wrong_shape_says_to_retry_later(server, kind):
    server.reply, options = REPLIES[kind]
    result = send(requests.Session(), scenario(server, **options), "hi")
    assert (result.ok, result.answered, result.status) == (False, True, 200)
    assert result.error.startswith("unexpected reply"), result.error
    assert result.retry_later and result.bad_reply


@pytest.mark.parametrize("kind", list(REPLIES))
def test_a_reply_of_the_wrong_shape_is_paused_and_counted(server, monkeypatch, kind):
    # a fixed 0.4 s pause: a user sends at most 3 requests in 1 s (at 0, 0.4, 0.8 s); unpaused, hundreds
    monkeypatch.setattr(runner, "BACKOFF_FIRST_S", 0.4)
    monkeypatch.setattr(runner, "BACKOFF_MAX_S", 0.4)
    server.reply, options = REPLIES[kind]
    level = bench.run_level(scenario(server, **options), users=2, requests_per_user=None, duration_s=1.0)
    assert level["completed"] == 0 and 2 <= level["failed"] <= 6, level
    assert level["unexpected_replies"] == level["failed"] == server.requests


def test_the_report_names_the_likely_cause(server):
    server.reply = html
    args = ["--url", server.url, "--users", "2", "--requests", "2"]
    res = CliRunner().invoke(app, ["bench", "--model", "m", *args])
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    # what came, not only that it was not an event stream
    assert (
        "unexpected reply (Content-Type text/html): no 'data:' event in the streamed reply: it began <html>"
        in (text)
    ), text
    assert "4 request(s) got a 200 that is not an openai/sglang API reply" in text, text
    assert "--url (or --api) likely points at another service" in text, text
    res = CliRunner().invoke(app, ["bench", "--model", "m", *args, "--json"])
    assert json.loads(res.output)["levels"][0]["unexpected_replies"] == 4
