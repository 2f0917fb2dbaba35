"""A Retry-After pause is at most the request timeout, against a real local server. Before, it was capped at
60 s whatever --timeout said: a --requests level whose server answered "Retry-After: 60" held each user
60 s between requests (99 minutes for --requests 100) although no request of it could take more than
--timeout. Now the pause is capped at the lesser of the two, and the level reports that cap."""

from __future__ import annotations

import threading

from test_bench_http import scenario
from test_bench_review5_retry_after import busy, busy_once
from typer.testing import CliRunner

from ktinfra import bench
from ktinfra.cli import app


def run_bounded(**kw) -> dict:
    """run_level in a thread, waited for at most 20 s (the old code paused 30 s)."""
    out: list[dict] = []
    thread = threading.Thread(target=lambda: out.append(bench.run_level(**kw)), daemon=True)
    thread.start()
    thread.join(timeout=20.0)
    assert out, "the level was still pausing after 20 s"
    return out[0]


def test_a_retry_after_longer_than_the_timeout_pauses_the_timeout(server):
    server.reply = busy_once("30")
    level = run_bounded(sc=scenario(server, timeout_s=1.0), users=1, requests_per_user=2)
    assert (level["completed"], level["failed"], level["pauses"]) == (1, 1, 1), level
    assert level["paused_s"] == 1.0, level
    ra = level["retry_after"]
    assert (ra["honoured"], ra["capped"], ra["max_s"], ra["odd_values"]) == (0, 1, 1.0, ["30"]), ra


def test_a_retry_after_within_the_timeout_is_honoured(server):
    server.reply = busy_once("1")
    level = run_bounded(sc=scenario(server, timeout_s=5.0), users=1, requests_per_user=2)
    assert level["paused_s"] == 1.0 and level["retry_after"]["honoured"] == 1, level
    assert level["retry_after"]["max_s"] == 5.0, level


def test_the_command_line_says_the_timeout_capped_the_pause(server):
    server.reply = busy("30")
    args = ["bench", "--model", "m", "--url", server.url, "--users", "1", "--requests", "2", "--timeout", "1"]
    out: list = []
    thread = threading.Thread(target=lambda: out.append(CliRunner().invoke(app, args)), daemon=True)
    thread.start()
    thread.join(timeout=20.0)
    assert out, "the command was still pausing after 20 s"
    assert out[0].exit_code == 1, out[0].output
    text = " ".join(out[0].output.split())
    # both replies asked 30 s (the second one's pause never came: the level had ended)
    assert "did not follow ('30'): 2 over 1 s (60 s, or --timeout if less) paused only" in text, text
