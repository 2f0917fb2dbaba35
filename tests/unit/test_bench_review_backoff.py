"""A user of `ktinfra bench` pauses (a bounded backoff, 0.05 s doubling to 1 s) after a server error too, not
only after no answer or a 429/503, against a real local server: a 500, 502 or 504, a stream the server
failed (an error event) or cut off, and a connection reset in the middle of the reply. Before, the user
re-sent at once, hammering a broken server: 2 users sent hundreds of requests a second to a server
answering 500. Each such request is still counted as a failed one with its error."""

from __future__ import annotations

import socket
import struct

import pytest
import requests
from test_bench_http import delta, scenario, sse, whole

from ktinfra import bench
from ktinfra.bench import runner
from ktinfra.bench.client import send

ERROR_EVENT = b'data: {"error": {"message": "KV cache full"}}\n\n'


def _reset(h, _body):
    """A 200 whose body is cut by a TCP reset after the first event."""
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Content-Length", "100000")
    h.end_headers()
    h.wfile.write(delta("a"))
    h.wfile.flush()
    h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    h.connection.close()
    h.close_connection = True


REPLIES = {
    "500": lambda h, body: whole(h, b"broken", 500),
    "502": lambda h, body: whole(h, b"bad gateway", 502),
    "504": lambda h, body: whole(h, b"gateway timeout", 504),
    "error event": lambda h, body: sse(h, [delta("a"), ERROR_EVENT]),
    "cut off": lambda h, body: sse(h, [delta("a")]),
    "reset": _reset,
}


@pytest.mark.parametrize("kind", list(REPLIES))
def test_server_errors_are_paused_and_counted(server, monkeypatch, kind):
    # a fixed 0.4 s pause: a user sends at most 3 requests in 1 s (at 0, 0.4, 0.8 s); unpaused, hundreds
    monkeypatch.setattr(runner, "BACKOFF_FIRST_S", 0.4)
    monkeypatch.setattr(runner, "BACKOFF_MAX_S", 0.4)
    server.reply = REPLIES[kind]
    level = bench.run_level(scenario(server), users=2, requests_per_user=None, duration_s=1.0)
    assert level["completed"] == 0
    assert 2 <= level["failed"] <= 6, level
    assert len(level["errors"]) >= 1


@pytest.mark.parametrize("kind", list(REPLIES))
def test_each_server_error_says_to_retry_later(server, kind):
    server.reply = REPLIES[kind]
    result = send(requests.Session(), scenario(server), "hi")
    assert not result.ok and result.answered and result.retry_later, result


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_do_not_say_to_retry_later(server, status):
    server.reply = lambda h, body: whole(h, b"bad request", status)
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.status, result.retry_later) == (False, status, False)


def test_a_success_does_not_say_to_retry_later(server):
    server.reply = lambda h, body: sse(h, [delta("a"), b"data: [DONE]\n\n"])
    result = send(requests.Session(), scenario(server), "hi")
    assert (result.ok, result.retry_later) == (True, False)
