"""Ctrl-C during `ktinfra bench`, for real: the command in a subprocess against a slow local server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_bench_http import DONE, USAGE, delta, sse

ROOT = Path(__file__).parents[2]


def test_ctrl_c_stops_the_load_at_once(server):
    # each request streams for 30 s; 2 users x 3 requests is 90 s of load. Ctrl-C used to be honoured only
    # once every remaining request had been sent and answered (the executor joined its threads), and then
    # the process exited 130 without a word.
    server.reply = lambda h, body: sse(h, [delta("a ")] * 60 + [USAGE, DONE], gap_s=0.5)
    bench = subprocess.Popen(
        [sys.executable, "-m", "ktinfra", "bench", "--url", server.url, "--model", "m"]
        + ["--users", "2", "--requests", "3", "--json"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal
    )
    try:
        started = time.monotonic()
        while server.requests < 2 and time.monotonic() - started < 60:
            time.sleep(0.05)
        assert server.requests == 2
        bench.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        out, err = bench.communicate(timeout=120)
    finally:
        bench.kill()
    assert time.monotonic() - interrupted < 15  # not even the requests in flight (30 s each) are waited for
    assert bench.returncode == 130
    assert "error: interrupted" in err and "Traceback" not in err
    assert server.requests == 2  # no request was started after Ctrl-C
