"""A streamed line that grows without a newline, against a real local server: the reader joined the pending
line with each new 64 KiB read and split all of it again, quadratic work (134 s of CPU, the GIL held, for one
64 MiB line), so a request with --timeout 20 timed out long before its "ran past 64 MiB". Now only each new
read is searched: the line is refused in seconds. Lines split across reads, several lines in one read and
CRLF endings still come out whole."""

from __future__ import annotations

import requests
from test_bench_http import scenario

from ktinfra.bench.client import MAX_REPLY_BYTES, _lines, send


def test_an_endless_line_is_refused_at_the_limit_not_after_the_timeout(server):
    def endless(h, _body):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(b'data: {"choices": [{"delta": {"content": "')
        chunk = b"x" * (1 << 20)
        try:
            for _ in range((MAX_REPLY_BYTES >> 20) + 4):
                h.wfile.write(chunk)
        except OSError:  # the client closed the connection at the limit
            pass

    server.reply = endless
    result = send(requests.Session(), scenario(server, timeout_s=20.0), "hi")
    assert (result.ok, result.error) == (
        False,
        "unexpected reply: a streamed line ran past 64 MiB without a newline",
    )


def test_lines_split_across_reads_come_out_whole():
    pieces = [b"da", b"ta: 1\r", b"\ndata: 2\n\nda", b"ta: 3", b"\n", b"tail\r"]
    assert list(_lines(iter(pieces))) == [b"data: 1", b"data: 2", b"", b"data: 3", b"tail"]


def test_a_read_of_several_whole_lines():
    assert list(_lines(iter([b"a\nb\r\n\nc\n"]))) == [b"a", b"b", b"", b"c"]
    assert list(_lines(iter([b"", b"x", b""]))) == [b"x"]
