"""How a streamed reply's tokens are counted and timed when the server's counts come late or its thinking
comes under vLLM's field name: against a real local HTTP server (tests/unit/test_bench_http.Server)."""

from __future__ import annotations

import json

import requests
from test_bench_http import DONE, USAGE, delta, scenario, sse, whole

from ktinfra import bench
from ktinfra.bench.client import send


def event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def test_a_count_that_first_comes_with_the_last_text_adds_only_what_it_grew_by(server):
    # 4 chunks of text, the last carrying finish_reason and usage (completion_tokens 4) together, as some
    # OpenAI-compatible servers send it: the count was taken as 4 new tokens over 0, so the last chunk made
    # 4 ITL gaps (7 for a 4-token reply, 4 of them a quarter of the real gap: median ITL far too low)
    last = {
        "choices": [{"delta": {"content": "d"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 4},
    }
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), delta("c"), event(last), DONE], gap_s=0.1)
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.output_tokens, result.tokens_estimated) == (True, 4, False)
    assert len(result.itl_s) == 3  # one gap per token after the first
    assert min(result.itl_s) > 0.05  # each a whole 0.1 s gap, none split


def test_a_count_that_grows_by_several_tokens_still_splits_its_gap(server):
    # SGLang --stream-interval 3 with running counts: 1, then 4, 7 (the /generate form, and /v1 with
    # continuous_usage_stats): each later chunk is 3 gaps of a third, as before
    def chunk(text: str, count: int) -> bytes:
        return event({"choices": [{"delta": {"content": text}}], "usage": {"completion_tokens": count}})

    server.reply = lambda h, body: sse(h, [chunk("a", 1), chunk("bcd", 4), chunk("efg", 7), USAGE, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.output_tokens, len(result.itl_s)) == (True, 7, 6)


def reasoning(text: str) -> bytes:
    # vLLM with --reasoning-parser: the thinking is delta.reasoning, no reasoning_content any more
    return event({"choices": [{"delta": {"reasoning": text, "content": None}}]})


def test_vllm_reasoning_field_is_generated_text(server):
    # the thinking was not seen: TTFT came out as the time to the first answer token (here after 0.9 s of
    # thinking), and ITL had 0 gaps for the 3 thinking chunks
    server.reply = lambda h, body: sse(
        h, [reasoning("hmm"), reasoning(" so"), reasoning(" ok"), delta("a"), USAGE, DONE], gap_s=0.3
    )
    result = send(requests.Session(), scenario(server), "hi")
    assert result.ok and result.ttft_s < 0.25 and len(result.itl_s) == 3


def test_a_reply_all_vllm_thinking_without_usage_counts(server):
    # a reply that is all thinking (max_tokens reached in it), no usage: it failed "server returned no tokens"
    server.reply = lambda h, body: sse(h, [reasoning("hmm"), reasoning(" so"), DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.output_tokens, result.tokens_estimated, len(result.itl_s)) == (True, 2, True, 1)
    message = {"role": "assistant", "reasoning": "a" * 40, "content": None}
    server.reply = lambda h, body: whole(h, json.dumps({"choices": [{"message": message}]}).encode())
    result = send(requests.Session(), scenario(server, stream=False), "hi")
    assert (result.ok, result.output_tokens) == (True, 10)


def test_thinking_under_both_names_is_counted_once(server):
    # a server in transition sends the same text as reasoning_content and reasoning: not twice the chars
    both = event({"choices": [{"delta": {"reasoning_content": "a" * 40, "reasoning": "a" * 40}}]})
    server.reply = lambda h, body: sse(h, [both, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.output_tokens) == (True, 10)


def test_a_reasoning_field_that_is_not_text_is_left_alone(server):
    # some APIs put an object under "reasoning" (effort, summary): not thinking text, and not a bad reply
    odd = event({"choices": [{"delta": {"reasoning": {"effort": "low"}, "content": "abcd"}}]})
    server.reply = lambda h, body: sse(h, [odd, DONE])
    level = bench.run_level(scenario(server), users=1, requests_per_user=1)
    assert (level["completed"], level["failed"], level["total_output_tokens"]) == (1, 0, 1)
