"""A --capacity level with a request cut at the end of its --duration, against a real local server. Cut
requests are neither completed nor failed (d44dc21), and the capacity criterion only looked at the failed
ones and the completed users' speed: a level whose one stalled user never finished passed on the speed of
the others. A cut request now fails its level, and the default grace of a --capacity search is long enough
for a request at --min-tps to finish (--gen-tokens / --min-tps), so a cut one is one that was too slow."""

from __future__ import annotations

import json
import threading

from test_bench_http import USAGE, delta, scenario, sse
from test_bench_review6_duration_end import stalling
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.cli import app


def first_stalls():
    """The first request stalls (a token every 0.1 s for 30 s), every other one is answered at once."""
    stall = stalling([], threading.Lock())
    seen = []

    def reply(h, body):
        seen.append(1)
        if len(seen) == 1:
            stall(h, body)
        else:
            sse(h, [delta("a"), USAGE, b"data: [DONE]\n\n"])

    return reply


def test_a_level_with_a_cut_request_does_not_pass(server):
    server.reply = first_stalls()
    sc = scenario(server, timeout_s=20.0)
    level = bench.run_level(sc, users=2, requests_per_user=None, duration_s=0.5, grace_s=0.3)
    assert level["cut"] == 1 and level["failed"] == 0 and level["completed"] >= 1, level
    assert level["user_tps"]["min"] >= 1.0, level  # the user that was answered was fast
    assert not bench.level_passes(level, min_tps=1.0)


def test_a_level_without_cut_requests_still_passes(server):
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, b"data: [DONE]\n\n"])
    level = bench.run_level(scenario(server), users=2, requests_per_user=None, duration_s=0.3, grace_s=0.3)
    assert level["cut"] == 0 and level["failed"] == 0 and level["completed"] >= 2, level
    assert bench.level_passes(level, min_tps=1.0)


def test_the_capacity_grace_lets_a_request_at_the_target_finish(server):
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, b"data: [DONE]\n\n"])
    args = ["--url", server.url, "--capacity", "--min-tps", "0.5", "--max-users", "1", "--duration", "0.2"]
    res = CliRunner().invoke(app, ["bench", "--model", "m", "--gen-tokens", "100", *args, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["scenario"]["grace_s"] == 200.0  # 100 tokens at 0.5 tok/s
