"""Streamed errors and bad data lines over several `data:` lines, against a real local server. The SSE spec
(html.spec.whatwg.org, server-sent events) joins an event's data lines with '\\n'. An `event: error` before
its data took only the first data line as the message (a JSON error split over lines showed its first line,
`{"error":`). A data line that is no JSON from a server that sends no blank lines swallowed every later line,
[DONE] too, and failed only when the stream ended, showing the joined text instead of the bad line."""

from __future__ import annotations

import requests
from test_bench_http import DONE, USAGE, delta, scenario, sse

from ktinfra.bench.client import send


def no_blank_lines(*events: bytes) -> list[bytes]:
    return [e.rstrip(b"\n") + b"\n" for e in events]


def test_an_error_event_s_json_over_several_data_lines_is_read_whole(server):
    error = b'event: error\ndata: {"error":\ndata:  {"message": "out of memory", "code": 500}}\n\n'
    server.reply = lambda h, body: sse(h, [delta("a"), error, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    # before: 'server error: {"error":'
    assert (result.ok, result.server_failed, result.error) == (False, True, "server error: out of memory")


def test_an_error_event_s_plain_text_lines_are_joined(server):
    error = b"event: error\ndata: worker 3 lost\ndata: retry later\n\n"
    server.reply = lambda h, body: sse(h, [delta("a"), error, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server error: worker 3 lost\\nretry later")


def test_an_error_event_without_blank_lines_ends_at_the_next_whole_event(server):
    stream = no_blank_lines(delta("a"), b"event: error\n", b"data: out of memory\n", delta("b"), DONE)
    server.reply = lambda h, body: sse(h, stream)
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server error: out of memory")


def test_a_bad_line_without_blank_lines_fails_at_once_naming_that_line(server):
    # the stream never ends: before, the bad line gathered every later one until the request's timeout
    bad = b"data: <html>Bad Gateway</html>\n"
    stream = no_blank_lines(delta("a"), bad, delta("b"), delta("c"), USAGE)

    def reply(h, _body):
        sse(h, stream)
        h.rfile.read()  # holds the connection open until the client hangs up

    server.reply = reply
    result = send(requests.Session(), scenario(server, timeout_s=10.0), "hi")
    assert (result.ok, result.bad_reply) == (False, True)
    assert result.error == "unexpected reply: not JSON: <html>Bad Gateway</html>"


def test_done_ends_an_event_cut_short_without_a_blank_line(server):
    stream = no_blank_lines(delta("a"), b'data: {"choices": [\n', DONE, delta("b"))
    server.reply = lambda h, body: sse(h, stream)
    result = send(requests.Session(), scenario(server), "hi")
    # before: [DONE] and the event after it were joined to the cut one: 'not JSON: {"choices": [\n[DONE]...'
    assert (result.ok, result.error) == (False, 'unexpected reply: not JSON: {"choices": [')


def test_the_first_bad_line_of_a_split_event_is_named(server):
    event = b'data: {"choices": [{"delta":\ndata: {"content": "b"}}\ndata: oops\ndata: ]}\n\n'
    server.reply = lambda h, body: sse(h, [delta("a"), event, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "unexpected reply: not JSON at data line 3 of 4: oops")


def test_a_split_event_that_ends_inside_its_json_says_so(server):
    event = b'data: {"choices": [{"delta":\ndata: {"content": "b"}}\n\n'
    server.reply = lambda h, body: sse(h, [delta("a"), event, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert result.error == (
        "unexpected reply: not JSON: an event's 2 data lines end inside a JSON value: "
        '{"choices": [{"delta":\\n{"content": "b"}}'
    )


def test_a_bad_line_then_plain_text_named_an_error_is_still_the_message(server):
    # data lines that cannot be JSON wait for the blank line: the event may yet be named an error
    server.reply = lambda h, body: sse(h, [delta("a"), b"data: upstream\ndata: gone\nevent: error\n\n", DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server error: upstream\\ngone")
