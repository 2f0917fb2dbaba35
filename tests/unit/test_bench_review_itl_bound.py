"""A streamed reply whose running token count jumps far past what was asked (a count up to 10^9 is taken
as a count), against a real local server: each chunk of n tokens adds n inter-token gaps, so one such
event made a list of millions of floats per request (10^9 of them: gigabytes, the bench killed for
memory). The gaps of a request are now bounded by --gen-tokens; a server that keeps to max_tokens gets
the same gaps as before."""

from __future__ import annotations

import json

import pytest
import requests
from test_bench_http import DONE, scenario, sse

from ktinfra.bench.client import send

FINISH = b'data: {"choices": [{"delta": {}, "finish_reason": "length"}]}\n\n'


def counted(text: str, tokens: int) -> bytes:
    event = {
        "choices": [{"delta": {"content": text}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": tokens},
    }
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def test_a_count_far_past_the_asked_tokens_does_not_make_millions_of_gaps(server):
    server.reply = lambda h, body: sse(h, [counted("a", 1), counted("b", 3_000_000), FINISH, DONE])
    result = send(requests.Session(), scenario(server), "hi")  # gen_tokens 7
    assert result.ok
    assert result.output_tokens == 3_000_000  # the server's count, as it said
    assert 1 <= len(result.itl_s) <= 7  # before: 2999999


@pytest.mark.parametrize("counts", [[1, 2, 3, 4, 5, 6, 7], [2, 4, 7], [1, 7], [3, 6]])
def test_a_server_that_keeps_to_max_tokens_gets_one_gap_per_token_after_the_first_chunk(server, counts):
    events = [counted(chr(97 + i), c) for i, c in enumerate(counts)]
    server.reply = lambda h, body: sse(h, [*events, FINISH, DONE], gap_s=0.01)
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.output_tokens) == (True, counts[-1])
    assert len(result.itl_s) == counts[-1] - counts[0]
