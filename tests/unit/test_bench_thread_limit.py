"""`ktinfra bench` where the OS refuses a thread (a pids limit, ulimit -u or -v, systemd TasksMax): each user
is a thread and each request's deadline a timer thread, so --users/--max-users up to 4096 can meet it. A
real ktinfra process under real limits: thread stacks of 256 MiB (RLIMIT_STACK, glibc's default thread
stack size) and an address space (RLIMIT_AS) with room for 2 of them once ktinfra is imported, so a level
of 1 user (its thread and its request's timer) runs and a level of 2 (3 threads at least) cannot."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

from test_bench_http import DONE, USAGE, delta, sse

STACK = 256 << 20
CHILD = f"""
import resource, sys
from ktinfra.cli import app
size = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024
room = size + 2 * {STACK} + (100 << 20)
resource.setrlimit(resource.RLIMIT_AS, (room, room))
sys.argv = ["ktinfra", *sys.argv[1:]]
app()
"""


def limited(*args: str) -> subprocess.CompletedProcess:
    def big_stacks() -> None:
        resource.setrlimit(resource.RLIMIT_STACK, (STACK, STACK))

    return subprocess.run(
        [sys.executable, "-c", CHILD, "bench", "--model", "m", "--requests", "1", *args],
        preexec_fn=big_stacks,
        env={**os.environ, "MALLOC_ARENA_MAX": "1", "NO_PROXY": "*", "no_proxy": "*"},
        cwd="/",  # python -c puts the working directory first on sys.path
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_refused_thread_during_a_capacity_search_keeps_the_finished_levels(server):
    # it was a RuntimeError traceback ("can't start new thread") and the levels already measured were lost
    server.reply = lambda h, body: sse(h, [delta("a"), delta("b"), USAGE, DONE])
    run = limited("--url", server.url, "--capacity", "--min-tps", "1", "--max-users", "64", "--json")
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr and "RuntimeError" not in run.stderr
    result = json.loads(run.stdout)
    assert result["interrupted"] is True and "the OS refused to start" in result["error"]
    assert [lv["concurrency"] for lv in result["levels"]] == [1]
    assert result["levels"][0]["pass"] is True and result["capacity_at_least"] == 1
    assert run.stderr.strip().splitlines()[-1].startswith("error: the OS refused to start")
    assert "lower --max-users: the search stopped after 1 finished level(s)" in run.stderr


def test_a_refused_thread_in_one_level_is_one_error_line(server):
    server.reply = lambda h, body: sse(h, [delta("a"), USAGE, DONE])
    run = limited("--url", server.url, "--users", "8")
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    lines = [line for line in run.stderr.splitlines() if not line.lstrip().startswith("8 users")]
    assert len(lines) == 1 and lines[0].startswith("error: the OS refused to start"), run.stderr
    assert lines[0].endswith("; lower --users")
