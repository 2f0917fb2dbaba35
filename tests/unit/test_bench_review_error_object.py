"""An error object sent unwrapped inside a 200 reply (``{"object": "error", "message": ..., "code": 400}``,
the OpenAI-style ErrorResponse shape that older vLLM-style servers put in the stream as is), against a real
local server: it fails the request with the server's message. Before, the tokens streamed before it and the
[DONE] after it made the request a success."""

from __future__ import annotations

import requests
from test_bench_http import DONE, delta, scenario, sse, whole

from ktinfra import bench
from ktinfra.bench.client import send

FLAT = (
    b'data: {"object": "error", "message": "Aborted: KV cache full", "type": "BadRequestError", '
    b'"param": null, "code": 400}\n\n'
)


def test_an_unwrapped_error_event_mid_stream_fails_the_request(server):
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), FLAT, DONE])
    level = bench.run_level(scenario(server), users=1, requests_per_user=2)
    assert (level["completed"], level["failed"], level["errors"]) == (
        0,
        2,
        ["server error: Aborted: KV cache full"],
    )
    assert level["total_output_tokens"] == 0


def test_an_unwrapped_error_as_a_whole_200_reply_gives_its_message(server):
    # before: "server returned no tokens", the server's own message lost
    server.reply = lambda h, body: whole(h, FLAT[len(b"data: ") :].strip())
    result = send(requests.Session(), scenario(server, stream=False), "hi")
    assert (result.ok, result.error) == (False, "server error: Aborted: KV cache full")


def test_an_ordinary_chunk_with_another_object_still_counts(server):
    chunk = b'data: {"object": "chat.completion.chunk", "choices": [{"delta": {"content": "ab"}}]}\n\n'
    server.reply = lambda h, body: sse(h, [chunk, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.output_tokens) == (True, None, 1)
