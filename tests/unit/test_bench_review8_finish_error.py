"""A reply whose finish_reason is "error" (Together's API; vLLM's FinishReason.ERROR, e.g. a failed KV
transfer between prefill and decode) counted as a success: the tokens before it made a completed request
with its speed in the table, and a --capacity level passed on a reply the server said had failed. Only
"abort" was read as a failure; "error" now is too, streamed or whole."""

from __future__ import annotations

import json

import requests
from test_bench_http import DONE, USAGE, delta, scenario, sse, whole

from ktinfra.bench.client import send

ERROR_END = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"error"}]}\n\n'


def test_a_streamed_finish_reason_error_fails_the_request(server):
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), ERROR_END, USAGE, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error) == (False, "server ended the reply with finish_reason error")
    assert result.server_failed and result.output_tokens == 0


def test_a_whole_reply_with_finish_reason_error_fails(server):
    reply = {"choices": [{"message": {"content": "ab"}, "finish_reason": "error"}], "usage": {}}
    server.reply = lambda h, body: whole(h, json.dumps(reply).encode())
    result = send(requests.Session(), scenario(server, stream=False), "hi")
    assert (result.ok, result.error) == (False, "server ended the reply with finish_reason error")


def test_other_finish_reasons_still_complete(server):
    stop = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    server.reply = lambda h, body: sse(h, [delta("a"), stop, USAGE, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.output_tokens) == (True, None, 7)
