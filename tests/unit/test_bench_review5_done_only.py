"""A stream that is only `data: [DONE]` failed as "no 'data:' event in the streamed reply", although the
server had sent one: the report pointed at the wrong thing. It now says the stream held [DONE] and no event,
and still pauses the user (a 200 that is not an answer: test_bench_review5_bad_reply)."""

from __future__ import annotations

import requests
from test_bench_http import DONE, scenario, sse

from ktinfra.bench.client import send


def test_a_stream_of_only_done_says_so(server):
    server.reply = lambda h, body: sse(h, [DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert result.error == "unexpected reply: the stream held [DONE] and no event before it", result.error
    assert not result.ok and result.retry_later
