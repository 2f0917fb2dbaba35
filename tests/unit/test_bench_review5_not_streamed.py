"""A server that answers stream=true with one whole JSON reply (it does not stream) failed as "no 'data:'
event in the streamed reply" and nothing more: the report now shows how the reply began and names
--no-stream."""

from __future__ import annotations

import requests
from test_bench_http import scenario, whole

from ktinfra.bench.client import send


def test_a_whole_reply_to_a_stream_request_names_no_stream(server):
    server.reply = lambda h, body: whole(h, b'{"choices":[{"message":{"content":"x"}}]}')
    result = send(requests.Session(), scenario(server), "hi")
    assert result.error == (
        "unexpected reply: no 'data:' event in the streamed reply: it began "
        '{"choices":[{"message":{"content":"x"}}]} (a whole reply: the server does not stream, '
        "try --no-stream)"
    ), result.error
    assert result.retry_later
