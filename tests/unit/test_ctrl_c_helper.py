"""The Ctrl-C helper the interrupted-run tests share (molecule/_shared/ctrl_c.py): when it returns,
nothing the interrupted command started is still running. Before, a child that outlived ansible-playbook
(the pip that `python -m venv` runs) went on writing into the venv while the test's next run emptied it
(seen under pytest-xdist: "Directory not empty: '_vendor'")."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from role_play import ctrl_c_until_exit, start_in_own_group

# The leader exits on Ctrl-C at once; its child ignores SIGINT and writes a line every 20 ms for 30 s.
SCRIPT = """
import signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", '''
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
with open(sys.argv[1], "a") as out:
    for _ in range(1500):
        out.write("x\\\\n"); out.flush(); time.sleep(0.02)
''', sys.argv[1]])
print(child.pid, flush=True)
time.sleep(60)
"""


def test_what_the_interrupted_command_left_running_is_stopped_before_it_returns(tmp_path):
    ticks, log = tmp_path / "ticks", tmp_path / "out.log"
    with log.open("w") as out:
        proc = start_in_own_group([sys.executable, "-c", SCRIPT, str(ticks)], dict(os.environ), out)
        deadline = time.monotonic() + 30
        while not (ticks.exists() and ticks.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        ctrl_c_until_exit(proc, seconds=30)
    assert proc.returncode != 0
    child = int(log.read_text().split()[0])
    written = ticks.stat().st_size
    time.sleep(0.3)
    assert ticks.stat().st_size == written, "the child ignoring SIGINT still writes after the helper returned"
    stat = Path(f"/proc/{child}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"  # gone or a zombie


def test_what_runs_under_the_test_folder_outside_the_group_is_stopped_too(tmp_path):
    """interrupt_play's second sweep (kill_what_runs_under): a process that left the play's process group
    (its own session) but runs on a path under the test's folder is stopped; one elsewhere is left alone."""
    from ctrl_c import kill_what_runs_under

    ticks = tmp_path / "ticks"
    writer = [
        sys.executable,
        "-c",
        "import sys, time\nwhile True: open(sys.argv[1], 'a').write('x'); time.sleep(0.02)",
    ]
    inside = subprocess.Popen([*writer, str(ticks)], start_new_session=True)
    outside = subprocess.Popen([*writer, "/dev/null"], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not ticks.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        kill_what_runs_under(tmp_path)
        assert inside.wait(timeout=5) == -9
        written = ticks.stat().st_size
        time.sleep(0.2)
        assert ticks.stat().st_size == written
        assert outside.poll() is None
    finally:
        for proc in (inside, outside):
            proc.kill()
            proc.wait()
