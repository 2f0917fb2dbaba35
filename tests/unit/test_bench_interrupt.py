"""Ctrl-C during `ktinfra bench`, for real: the command in a subprocess against a slow local server."""

from __future__ import annotations

import json
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


def test_ctrl_c_during_a_capacity_search_keeps_the_finished_levels(server):
    """Before: levels already measured were dropped ("interrupted: no result")."""
    served = []

    def reply(h, body):
        served.append(1)
        gap = 0.0 if len(served) == 1 else 0.5  # level 1 is quick, level 2 streams for 30 s
        sse(h, [delta("a ")] * (1 if gap == 0 else 60) + [USAGE, DONE], gap_s=gap)

    server.reply = reply
    bench = subprocess.Popen(
        [sys.executable, "-m", "ktinfra", "bench", "--url", server.url, "--model", "m"]
        + ["--capacity", "--min-tps", "1", "--requests", "1", "--json"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        started = time.monotonic()
        while server.requests < 3 and time.monotonic() - started < 60:  # level 1 done, level 2 sent
            time.sleep(0.05)
        assert server.requests == 3
        bench.send_signal(signal.SIGINT)
        out, err = bench.communicate(timeout=120)
    finally:
        bench.kill()
    assert bench.returncode == 130
    result = json.loads(out)
    assert result["interrupted"] is True and result["capacity_at_least"] == 1
    assert [(lv["concurrency"], lv["completed"], lv["pass"]) for lv in result["levels"]] == [(1, 1, True)]
    assert "interrupted after 1 finished level(s)" in err and "Traceback" not in err


def test_ctrl_c_while_plotting_keeps_the_measured_levels(server, tmp_path):
    """Drawing the plot takes seconds (matplotlib's import, a font cache to build): Ctrl-C then was a
    traceback out of matplotlib, and the capacity search just measured was never printed."""
    server.reply = lambda h, body: sse(h, [delta("a "), USAGE, DONE])
    plot = tmp_path / "capacity.png"
    bench = subprocess.Popen(
        [sys.executable, "-m", "ktinfra", "bench", "--url", server.url, "--model", "m"]
        + ["--capacity", "--min-tps", "1", "--max-users", "2", "--requests", "1", "--json"]
        + ["--plot", str(plot)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MPLCONFIGDIR": str(tmp_path / "mpl")},  # a cold cache
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    maps = Path(f"/proc/{bench.pid}/maps")
    try:
        started = time.monotonic()
        # matplotlib is imported by the plot only: once one of its libraries is mapped, the plot is drawn
        while bench.poll() is None and time.monotonic() - started < 60:
            if "matplotlib" in maps.read_text():
                break
            time.sleep(0.005)
        assert bench.poll() is None, "the plot was done before it could be interrupted"
        bench.send_signal(signal.SIGINT)
        out, err = bench.communicate(timeout=120)
    finally:
        bench.kill()
    assert bench.returncode == 130, err[-2000:]
    result = json.loads(out)
    assert result["capacity"] == 2 and [lv["concurrency"] for lv in result["levels"]] == [1, 2]
    assert "plot" not in result
    assert f"error: interrupted while plotting: no plot written to {plot}" in err and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir() if p.name != "mpl"] == []  # no plot, no temporary file
