"""A 200 event stream whose events are JSON of some other service (none has 'choices', or /generate's
'text') and end with [DONE] failed as "server returned no tokens" and paused nobody, as a right-shaped
empty answer does. It is now an unexpected reply (the user pauses, the report points at --url/--api), as
a whole reply without 'choices' is since test_bench_review5_bad_reply."""

from __future__ import annotations

import pytest
import requests
from test_bench_http import DONE, USAGE, delta, scenario, sse

from ktinfra.bench.client import send

OTHER = b'data: {"status": "ok", "progress": 0.5}\n\n'


@pytest.mark.parametrize("api", ["openai", "sglang"])
def test_a_stream_of_other_events_is_an_unexpected_reply(server, api):
    server.reply = lambda h, body: sse(h, [OTHER, OTHER, DONE])
    result = send(requests.Session(), scenario(server, api=api), "hi")
    field = "choices" if api == "openai" else "text"
    assert result.error == f"unexpected reply: no event with {field!r} in the streamed reply (2 events)"
    assert not result.ok and result.retry_later and result.bad_reply


def test_a_usage_event_without_choices_after_the_answer_is_fine(server):
    # some servers send the usage event without a 'choices' key: the answer's chunks had it
    usage = b'data: {"usage": {"prompt_tokens": 5, "completion_tokens": 2}}\n\n'
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), usage, DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.output_tokens, result.error) == (True, 2, None)


def test_an_empty_answer_of_the_right_shape_is_still_no_tokens(server):
    server.reply = lambda h, body: sse(h, [delta(""), USAGE.replace(b"7", b"0"), DONE])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.error, result.bad_reply) == (False, "server returned no tokens", False)
