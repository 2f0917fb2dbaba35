"""The end of a --duration level, against a real local server. Before, no user started another request at
the deadline, but those in flight ran on until their --timeout: a 60 s level against a server that stalls
took 60 s + 600 s, and each such request was reported as a failed one ("timed out after 600 s"), the
server's fault. Now they get a bounded grace (--grace, k6's gracefulStop) to finish, and what still runs
then is cut: the connection dropped, counted as cut, neither completed nor failed."""

from __future__ import annotations

import json
import threading
import time

from test_bench_http import USAGE, delta, scenario, sse
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.bench import runner
from ktinfra.cli import app


def stalling(left: list[int], lock: threading.Lock):
    """A 200 stream that sends a token every 0.1 s for 30 s; `left` counts the clients that dropped it."""

    def reply(h, _body):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        try:
            for _ in range(300):
                h.wfile.write(delta("a"))
                h.wfile.flush()
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            with lock:
                left.append(1)
            raise
        h.close_connection = True

    return reply


def test_requests_still_running_after_the_grace_are_cut_not_failed(server, monkeypatch):
    monkeypatch.setattr(runner, "GRACE_S", 0.3, raising=False)
    left, lock = [], threading.Lock()
    server.reply = stalling(left, lock)
    level = bench.run_level(scenario(server, timeout_s=20.0), users=2, requests_per_user=None, duration_s=0.3)
    assert (level["completed"], level["failed"], level["cut"]) == (0, 0, 2), level
    assert level["errors"] == [] and server.requests == 2, level
    assert level["total_output_tokens"] == 0 and level["output_throughput"] == 0.0, level
    end = time.monotonic() + 10.0  # the bench dropped both connections: the server saw them go
    while len(left) < 2 and time.monotonic() < end:
        time.sleep(0.05)
    assert len(left) == 2


def test_a_request_that_ends_within_the_grace_completes(server):
    def late(h, _body):
        time.sleep(0.5)
        sse(h, [delta("a"), USAGE, b"data: [DONE]\n\n"])

    server.reply = late
    level = bench.run_level(scenario(server), users=2, requests_per_user=None, duration_s=0.1)
    assert (level["completed"], level["failed"], level["cut"]) == (2, 0, 0), level
    assert level["total_output_tokens"] == 14, level


def cli(*args: str):
    return CliRunner().invoke(app, ["bench", "--model", "m", "--users", "2", *args])


def test_the_command_line_takes_grace_and_reports_the_cut(server):
    left, lock = [], threading.Lock()
    server.reply = stalling(left, lock)
    args = ["--url", server.url, "--duration", "0.3", "--grace", "0.3", "--timeout", "20"]
    res = cli(*args, "--json")
    assert res.exit_code == 1, res.output  # nothing completed
    out = json.loads(res.stdout)
    assert out["scenario"]["grace_s"] == 0.3, out["scenario"]
    assert (out["levels"][0]["cut"], out["levels"][0]["failed"]) == (2, 0), out["levels"][0]
    text = " ".join(cli(*args).output.split())
    assert "2 request(s) still running 0.3 s after the end of --duration were cut" in text, text
    assert "failed requests" not in text, text


def test_grace_needs_duration(server):
    res = cli("--url", server.url, "--grace", "5")
    assert res.exit_code == 1 and "give --duration too" in res.output, res.output
    assert server.requests == 0
