"""Errors streamed in the shapes other servers use, against a real local server: llama.cpp's server sends a
failure mid-stream as its own SSE field, a line `error: {"code": 500, "message": ..., "type":
"server_error"}` (server_sent_event(sink, "error", ...) in its utils.hpp), and SSE's standard shape is an
`event: error` line before the `data:` line. The stream reader read only `data:` lines: the error line was
skipped, so the request came out as a cut-off stream (tokens before it) or "no 'data:' event" (none), the
server's message lost; an `event: error` whose data had no "error" key counted as an ordinary event."""

from __future__ import annotations

import requests
from test_bench_http import DONE, delta, scenario, sse

from ktinfra import bench
from ktinfra.bench.client import send

LLAMA_ERROR = b'error: {"code":500,"message":"context shift is disabled","type":"server_error"}\n\n'


def test_a_llama_cpp_error_line_mid_stream_gives_its_message(server):
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), LLAMA_ERROR])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server error: context shift is disabled")
    assert (result.ttft_s, result.itl_s, result.output_tokens) == (None, [], 0)


def test_a_llama_cpp_error_line_before_any_token_gives_its_message(server):
    # before: "unexpected reply: no 'data:' event in the streamed reply"
    server.reply = lambda h, body: sse(h, [LLAMA_ERROR])
    level = bench.run_level(scenario(server), users=1, requests_per_user=2)
    assert (level["completed"], level["failed"]) == (0, 2)
    assert level["errors"] == ["server error: context shift is disabled"]


def test_an_sse_error_event_fails_the_request_with_its_data(server):
    # the data has no "error" key: before, an event like any other, and [DONE] made the request a success
    event = b'event: error\ndata: {"message": "worker lost", "code": 503}\n\n'
    server.reply = lambda h, body: sse(h, [delta("a"), event, delta("b"), DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server error: worker lost")


def test_an_sse_error_event_with_plain_text_data(server):
    server.reply = lambda h, body: sse(h, [delta("a"), b"event: error\ndata: upstream timed out\n\n", DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server error: upstream timed out")


def test_an_error_line_without_json_or_text(server):
    server.reply = lambda h, body: sse(h, [delta("a"), b"error: \n\n", DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server error (no message)")


def test_other_named_events_still_count(server):
    # an `event:` name other than error does not change how its data is read, and the name ends with the
    # blank line: the events after an error-free named one are ordinary tokens
    named = b'event: message\ndata: {"choices": [{"delta": {"content": "ab"}}]}\n\n'
    server.reply = lambda h, body: sse(h, [named, delta("c"), DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.output_tokens) == (True, None, 2)


def test_an_error_event_name_ends_with_its_event(server):
    # `event: error` with no data, then a blank line: the next event is an ordinary one
    server.reply = lambda h, body: sse(h, [b"event: error\n\n", delta("a"), DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.output_tokens) == (True, None, 1)
