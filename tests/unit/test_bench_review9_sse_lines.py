"""Event streams the SSE spec allows (html.spec.whatwg.org, server-sent events), against a real local server.
A UTF-8 byte-order mark at the start of the stream (the spec's decoder drops it) made the first line no
`data:` line: a one-token answer failed "the stream held [DONE] and no event before it". Lines ended by a
lone CR (the spec's end of line, as CRLF and LF are) were never split: the whole stream one line, "no 'data:'
event". Within an event the fields come in any order: an `event: error` after its `data:` line was not
seen, so a plain-text message failed as "not JSON", and a JSON one counted as an ordinary event."""

from __future__ import annotations

import pytest
import requests
from test_bench_http import DONE, USAGE, delta, scenario, sse

from ktinfra.bench.client import _lines, send

BOM = b"\xef\xbb\xbf"


def test_a_byte_order_mark_at_the_start_of_the_stream_is_dropped(server):
    server.reply = lambda h, body: sse(h, [BOM + delta("a"), DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.output_tokens) == (True, None, 1)


def test_a_byte_order_mark_split_across_reads_is_dropped_once():
    pieces = [BOM[:1], BOM[1:] + b"da", b"ta: 1\n", BOM + b"data: 2\n"]
    assert list(_lines(iter(pieces))) == [b"data: 1", BOM + b"data: 2"]  # only at the start of the stream


@pytest.mark.parametrize("end", [b"\r", b"\r\n", b"\n"])
def test_every_end_of_line_the_spec_allows_splits_events(server, end):
    events = [e.replace(b"\n", end) for e in (delta("a"), delta("b"), USAGE, DONE)]
    server.reply = lambda h, body: sse(h, events, chunked=True)
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.output_tokens, len(result.itl_s)) == (True, None, 7, 1)


def test_lone_carriage_returns_split_lines_across_reads():
    pieces = [b"data: 1\r", b"\rdata: 2\r", b"\n", b"\ndata: 3\r\r", b"\n", b"tail"]
    assert list(_lines(iter(pieces))) == [b"data: 1", b"", b"data: 2", b"", b"data: 3", b"", b"tail"]


def test_an_error_event_named_after_its_plain_text_data(server):
    # before: "unexpected reply: not JSON: upstream timed out"
    server.reply = lambda h, body: sse(h, [delta("a"), b"data: upstream timed out\nevent: error\n\n", DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.server_failed) == (False, True)
    assert result.error == "server error: upstream timed out"


def test_an_error_event_named_after_its_json_data(server):
    # before: an ordinary event, and [DONE] made the request a success
    event = b'data: {"message": "worker lost", "code": 503}\nid: 7\nevent: error\n\n'
    server.reply = lambda h, body: sse(h, [delta("a"), event, delta("b"), DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server error: worker lost")


def test_an_error_event_named_last_in_a_stream_without_blank_lines(server):
    server.reply = lambda h, body: sse(h, [b"data: gone\n", b"event: error\n"])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server error: gone")


def test_data_after_the_error_name_is_still_its_message(server):
    # a server that puts no blank line between events: each data line is its own event, and the one after
    # `event: error` is the message, as before
    stream = [delta("a").rstrip(b"\n") + b"\n", b"event: error\n", b"data: out of memory\n", DONE]
    server.reply = lambda h, body: sse(h, stream)
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server error: out of memory")


def test_events_without_blank_lines_between_them_still_count_one_by_one(server):
    stream = [e.rstrip(b"\n") + b"\n" for e in (delta("a"), delta("b"), delta("c"), USAGE, DONE)]
    server.reply = lambda h, body: sse(h, stream)
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.output_tokens, len(result.itl_s)) == (True, None, 7, 2)


def test_a_bad_event_with_no_error_name_is_still_refused(server):
    server.reply = lambda h, body: sse(h, [delta("a"), b"data: upstream timed out\n\n", DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "unexpected reply: not JSON: upstream timed out")
