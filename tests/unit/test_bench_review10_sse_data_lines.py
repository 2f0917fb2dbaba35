"""An event whose data comes in several `data:` lines, against a real local server. The SSE spec
(html.spec.whatwg.org, server-sent events) joins an event's data lines with '\\n' and dispatches the event at
the blank line; an OpenAI-style server may split a JSON chunk so. Each data line was read as an event of its
own: the first half of the chunk failed the request as "unexpected reply: not JSON" (a split error object
too, which hid the server's message)."""

from __future__ import annotations

import json

import requests
from test_bench_http import DONE, USAGE, delta, scenario, sse
from test_bench_odd_servers import endless

from ktinfra.bench.client import send


def split(event: bytes) -> bytes:
    """One event's JSON over as many data lines as it has top-level members."""
    value = json.loads(event.removeprefix(b"data: "))
    lines = json.dumps(value, indent=1).splitlines()
    return b"".join(b"data: " + line.encode() + b"\n" for line in lines) + b"\n"


def test_a_chunk_split_over_data_lines_is_one_event(server):
    events = [split(delta("a")), split(delta("b")), split(USAGE), DONE]
    assert events[0].count(b"data: ") > 2
    server.reply = lambda h, body: sse(h, events, chunked=True)
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.output_tokens, len(result.itl_s)) == (True, None, 7, 1)
    assert (result.prompt_tokens, result.tokens_estimated) == (5, False)


def test_split_and_whole_events_mix(server):
    events = [delta("a"), split(delta("b")), delta("c"), USAGE, DONE]
    server.reply = lambda h, body: sse(h, events, gap_s=0.05)
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.output_tokens, len(result.itl_s)) == (True, None, 7, 2)


def test_a_split_event_is_counted_at_the_stream_s_end_without_a_blank_line(server):
    last = b'data: {"choices": [{"delta": {"content": "b"},\ndata: "finish_reason": "stop"}]}\n'
    server.reply = lambda h, body: sse(h, [delta("a"), last])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.output_tokens) == (True, None, 2)


def test_a_split_error_object_is_the_server_s_failure(server):
    error = b'data: {"error":\ndata:  {"message": "out of memory", "code": 500}}\n\n'
    server.reply = lambda h, body: sse(h, [delta("a"), error, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.server_failed, result.error) == (False, True, "server error: out of memory")


def test_plain_text_data_named_an_error_after_it_is_the_whole_message(server):
    error = b"data: upstream\ndata: timed out\nevent: error\n\n"
    server.reply = lambda h, body: sse(h, [delta("a"), error, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.server_failed) == (False, True)
    assert result.error == "server error: upstream\\ntimed out"


def test_data_lines_that_join_into_no_json_are_refused(server):
    event = b'data: {"choices": [\ndata: oops\n\n'
    server.reply = lambda h, body: sse(h, [delta("a"), event, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.bad_reply) == (False, True)
    assert result.error == "unexpected reply: not JSON at data line 2 of 2: oops"


def test_an_endless_split_event_fails_once_it_is_too_big(server, monkeypatch):
    # each line is short, so the per-line bound never fires: the joined event has a bound of its own
    monkeypatch.setattr("ktinfra.bench.client.MAX_REPLY_BYTES", 1 << 20)
    server.reply = lambda h, body: endless(h, body, b"data: " + b"a" * 4096 + b"\n")
    result = send(requests.Session(), scenario(server, timeout_s=60.0), "hi")
    assert (result.ok, result.bad_reply) == (False, True)
    assert result.error == "unexpected reply: an event ran past 1 MiB of data lines"
