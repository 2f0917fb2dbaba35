"""What a 200 reply means for `ktinfra bench`, against a real local server that streams the way SGLang does:
a failure the server reports inside the reply (an error event, an abort) fails the request."""

from __future__ import annotations

import dataclasses
import json

import pytest
import requests
from test_bench_http import DONE, USAGE, delta, scenario, sse, whole
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.bench.client import send
from ktinfra.cli import app

# SGLang's serving_chat: a ValueError during generation becomes this event, then [DONE], on a 200 stream
OPENAI_ERROR = (
    b'data: {"error": {"object": "error", "message": "Aborted: KV cache full", "type": "BadRequestError", '
    b'"param": null, "code": 400}}\n\n'
)
OOM = b'data: {"error": "CUDA out of memory"}\n\n'  # transformers serve's form
BOOM = b'data: {"error": {"message": "boom"}}\n\n'  # SGLang /generate's form
ABORT = b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "abort"}]}\n\n'
LENGTH = b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}\n\n'


def native(text: str, tokens: int, finish: dict | None = None) -> bytes:
    meta = {"prompt_tokens": 5, "completion_tokens": tokens, "finish_reason": finish}
    event = {"text": text, "meta_info": meta}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def cli(*args: str):
    return CliRunner().invoke(app, ["bench", "--model", "m", *args])


@pytest.mark.parametrize(
    ("events", "api", "error"),
    [
        ([delta("a"), delta("b"), OPENAI_ERROR, DONE], "openai", "server error: Aborted: KV cache full"),
        ([delta("a"), USAGE, OPENAI_ERROR, DONE], "openai", "server error: Aborted: KV cache full"),
        ([delta("a"), OOM], "openai", "server error: CUDA out of memory"),
        ([delta("a"), ABORT, USAGE, DONE], "openai", "server aborted the request"),
        ([native("ab", 2), BOOM, DONE], "sglang", "server error: boom"),
        (
            [native("ab", 2), native("ab", 2, {"type": "abort", "message": "scheduler"}), DONE],
            "sglang",
            "server aborted the request: scheduler",
        ),
    ],
)
def test_a_failure_reported_inside_the_stream_fails_the_request(server, events, api, error):
    # these counted as completed requests with the tokens streamed before the failure
    server.reply = lambda h, body: sse(h, events)
    level = bench.run_level(scenario(server, api=api), users=1, requests_per_user=2)
    assert (level["completed"], level["failed"], level["errors"]) == (0, 2, [error])


def test_an_error_in_a_whole_reply_is_the_requests_error(server):
    server.reply = lambda h, body: whole(h, b'{"error": {"message": "context too long"}}')
    result = send(requests.Session(), scenario(server, stream=False), "hi")
    assert (result.ok, result.error) == (False, "server error: context too long")


def test_normal_finish_reasons_still_complete(server):
    stop = b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}\n\n'
    server.reply = lambda h, body: sse(h, [delta("a"), stop, USAGE, DONE])
    assert send(requests.Session(), scenario(server), "hi").ok
    length = native("ab", 2, {"type": "length", "length": 2})
    server.reply = lambda h, body: sse(h, [native("a", 1), length, DONE])
    assert send(requests.Session(), scenario(server, api="sglang"), "hi").ok


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize(
    ("api", "events"),
    [
        ("openai", [delta("a"), delta("b"), delta("c")]),
        ("sglang", [native("a", 1), native("ab", 2), native("abc", 3)]),
    ],
)
def test_a_stream_cut_off_before_its_end_fails_the_request(server, api, events, chunked):
    # the body ends cleanly after 3 of 7 tokens (a worker killed behind a proxy that closes the stream):
    # no [DONE], no finish_reason. It counted as a completed request with 3 tokens.
    server.reply = lambda h, body: sse(h, events, chunked=chunked)
    # a user each: sse() closes a chunked reply's connection unannounced, which a second request on it
    # may meet as "Remote end closed connection"
    level = bench.run_level(scenario(server, api=api), users=2, requests_per_user=1)
    assert (level["completed"], level["failed"]) == (0, 2)
    assert level["errors"] == ["stream ended before [DONE] (3 events, none with a finish_reason)"]


@pytest.mark.parametrize(
    ("api", "events"),
    [
        ("openai", [delta("a"), delta("b"), LENGTH, USAGE]),
        ("sglang", [native("a", 1), native("ab", 2, {"type": "length", "length": 2})]),
    ],
)
def test_a_stream_that_ends_with_a_finish_reason_but_no_done_completes(server, api, events):
    # some OpenAI-compatible servers send no [DONE]: the finish_reason says the answer is whole
    server.reply = lambda h, body: sse(h, events)
    result = send(requests.Session(), scenario(server, api=api), "hi")
    assert result.ok, result.error
    assert result.output_tokens == (7 if api == "openai" else 2)


def generate_events(pieces: list[str], incremental: bool, counted: bool = True) -> list[bytes]:
    """SGLang /generate events for these successive pieces of text: each carries the text so far (SGLang's
    default) or only its piece (--incremental-streaming-output); meta_info.completion_tokens is the running
    total in both modes."""
    events = []
    for i, piece in enumerate(pieces):
        text = piece if incremental else "".join(pieces[: i + 1])
        finish = {"type": "length", "length": len(pieces)} if i == len(pieces) - 1 else None
        meta = {"prompt_tokens": 5, "completion_tokens": i + 1, "finish_reason": finish}
        event = {"text": text, "meta_info": meta} if counted else {"text": text}
        events.append(b"data: " + json.dumps(event).encode() + b"\n\n")
    return [*events, DONE]


@pytest.mark.parametrize("incremental", [False, True], ids=["cumulative", "incremental"])
def test_a_generate_stream_is_timed_token_by_token_in_both_text_modes(server, incremental):
    # with --incremental-streaming-output the old client took each event's text for the text so far:
    # " the" after " the" added nothing, so 4 tokens 0.3 s apart gave one chunk and no ITL at all
    events = generate_events([" the", " the", " the", "."], incremental)
    server.reply = lambda h, body: sse(h, events, gap_s=0.3)
    result = send(requests.Session(), scenario(server, api="sglang"), "hi")
    assert (result.ok, result.output_tokens, result.tokens_estimated) == (True, 4, False), result.error
    assert result.ttft_s < 0.25
    assert len(result.itl_s) == 3 and all(0.15 < gap < 1.0 for gap in result.itl_s), result.itl_s


@pytest.mark.parametrize("incremental", [False, True], ids=["cumulative", "incremental"])
def test_a_generate_stream_without_counts_counts_each_new_text(server, incremental):
    # no meta_info: the text tells which events brought output ("!" is not past the end of " world")
    events = generate_events(["Hello", " world", "!"], incremental, counted=False)
    server.reply = lambda h, body: sse(h, events)
    level = bench.run_level(scenario(server, api="sglang"), users=1, requests_per_user=1)
    assert (level["completed"], level["total_output_tokens"], level["output_tokens_estimated"]) == (1, 3, 1)


def reasoning(text: str) -> bytes:
    event = {"choices": [{"delta": {"reasoning_content": text, "content": None}}]}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def test_reasoning_tokens_are_generated_tokens(server):
    # SGLang with --reasoning-parser streams the thinking as delta.reasoning_content: the first token left
    # at once, but TTFT came out as the time to the first answer token (here 0.9 s), and a reply that was
    # all thinking had no TTFT/ITL at all, or failed "server returned no tokens" without usage
    server.reply = lambda h, body: sse(
        h, [reasoning("hmm"), reasoning(" so"), reasoning(" ok"), delta("a"), USAGE, DONE], gap_s=0.3
    )
    result = send(requests.Session(), scenario(server), "hi")
    assert result.ok and result.ttft_s < 0.25 and len(result.itl_s) == 3
    server.reply = lambda h, body: sse(h, [reasoning("hmm"), reasoning(" so"), DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.output_tokens, result.tokens_estimated, len(result.itl_s)) == (True, 2, True, 1)


def test_reasoning_of_a_whole_reply_counts_without_usage(server):
    message = {"role": "assistant", "reasoning_content": "a" * 40, "content": None}
    server.reply = lambda h, body: whole(h, json.dumps({"choices": [{"message": message}]}).encode())
    result = send(requests.Session(), scenario(server, stream=False), "hi")
    assert (result.ok, result.output_tokens) == (True, 10)


def test_a_server_with_an_api_key_can_be_benchmarked(server, tmp_path):
    # render serve and lora serve put an API key on every server bound beyond 127.0.0.1, and SGLang then
    # answers 401 to requests without it: bench had no way to send one, so every request failed
    def keyed(h, body):
        if h.headers.get("Authorization") != "Bearer s3cret":
            whole(h, b'{"detail": "Invalid API Key"}', code=401)
        else:
            sse(h, [delta("a"), USAGE, DONE])

    server.reply = keyed
    key = tmp_path / "key"
    key.write_text("s3cret\n")
    res = cli("--url", server.url, "--users", "1", "--api-key-file", str(key), "--json")
    assert res.exit_code == 0, res.output
    level = json.loads(res.stdout)["levels"][0]
    assert (level["completed"], level["failed"]) == (2, 0)
    assert "s3cret" not in res.output
    res = cli("--url", server.url, "--users", "1", "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["levels"][0]["errors"][0].startswith("HTTP 401")


def test_an_unreadable_api_key_file_is_refused_before_any_request(server, tmp_path):
    res = cli("--url", server.url, "--users", "1", "--api-key-file", str(tmp_path / "missing"))
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "error: cannot read --api-key-file" in res.output
    assert server.requests == 0


@pytest.mark.parametrize("suffix", ["/v1", "/v1/", "/api/v1"])
def test_an_openai_base_url_with_v1_is_refused_before_any_request(server, suffix):
    # the base_url OpenAI clients take: every request went to /v1/v1/chat/completions, and each failed
    # 'HTTP 404: {"detail":"Not Found"}' without naming the path
    res = cli("--url", server.url + suffix, "--users", "1")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "ends in /v1: give the server's base URL without it" in res.output
    assert server.requests == 0


def test_a_chunk_of_several_tokens_counts_as_that_many_gaps(server):
    """SGLang --stream-interval 5: each event brings 5 tokens. bench_serving spreads the gap over them
    (5 gaps of 1/5); the old client took one 0.3 s gap per chunk, 5x SGLang's ITL."""
    events = [native(" w" * n, n) for n in (5, 10, 15)]
    events.append(native(" w" * 20, 20, {"type": "length", "length": 20}))
    server.reply = lambda h, body: sse(h, [*events, DONE], gap_s=0.3)
    asked = dataclasses.replace(scenario(server, api="sglang"), gen_tokens=20)  # the 20 the server sends
    result = send(requests.Session(), asked, "hi")
    assert (result.ok, result.output_tokens) == (True, 20), result.error
    assert len(result.itl_s) == 15 and all(0.03 < gap < 0.2 for gap in result.itl_s), result.itl_s


@pytest.mark.parametrize(
    ("args", "sent"),
    [
        (["--capacity", "--min-tps", "1", "--max-users", "1"], True),
        (["--capacity", "--min-tps", "1", "--max-users", "1", "--no-ignore-eos"], False),
        (["--users", "1"], False),
        (["--users", "1", "--ignore-eos"], True),
    ],
)
def test_the_capacity_search_asks_for_fixed_length_replies_by_default(server, args, sent):
    """A reply that stopped at its 2nd token scored 2 tokens / end-to-end time and failed the whole level
    while every other user streamed fast: the search keeps the output length fixed unless told not to."""
    bodies = []

    def reply(h, body):
        bodies.append(body)
        sse(h, [delta("a"), USAGE, DONE])

    server.reply = reply
    res = cli("--url", server.url, "--requests", "1", "--json", *args)
    assert res.exit_code == 0, res.output
    assert [b.get("ignore_eos", False) for b in bodies] == [sent]
    scenario = json.loads(res.stdout)["scenario"]
    assert scenario["ignore_eos"] is sent
    # a saved result says under which request timeout and search bound it was measured
    assert scenario["timeout_s"] == 600.0
    assert scenario.get("max_users") == (1 if "--capacity" in args else None)


def test_a_server_refusing_ignore_eos_is_told_the_flag(server):
    """transformers serve answers 422 to SGLang's ignore_eos, which --capacity sends by default."""
    server.reply = lambda h, body: whole(h, b'{"detail": "extra fields not permitted: ignore_eos"}', 422)
    res = cli("--url", server.url, "--capacity", "--min-tps", "1", "--max-users", "1", "--requests", "1")
    assert res.exit_code == 1
    assert "pass --no-ignore-eos to a server without it" in res.stderr
    res = cli("--url", server.url, "--users", "1", "--requests", "1")  # not sent unless asked: no hint
    assert res.exit_code == 1 and "--no-ignore-eos" not in res.stderr
