"""kt_serve's start-limit event listener for supervisord, roles/kt_serve/files/ktinfra_start_limit.py.

It was a program embedded base64 in program.conf.j2; now a file the role installs into supervisord's venv.
Here the file itself runs as supervisord runs it: it is fed PROCESS_STATE_STARTING events in supervisord's
event listener protocol on stdin (a header line, then a payload of len bytes), answers READY / RESULT 2 OK on
stdout, and stops the program over the XML-RPC of a real supervisord in a temporary directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from role_play import REPO

LISTENER = REPO / "roles" / "kt_serve" / "files" / "ktinfra_start_limit.py"
VENV = Path(sys.executable).parent.parent  # supervisor is a dev dependency
PROGRAM = "ktinfra-serve-t"


def _ctl(run: Path, *args: str) -> str:
    ctl = [str(VENV / "bin" / "supervisorctl"), "-c", str(run / "supervisord.conf"), *args]
    return subprocess.run(ctl, capture_output=True, text=True, timeout=60).stdout


def _state(run: Path) -> str:
    fields = _ctl(run, "status", PROGRAM).split()
    return fields[1] if len(fields) > 1 else ""


@pytest.fixture
def supervisord(tmp_path):
    """A real supervisord running PROGRAM (a sleep), and its RPC URL; the listener under test is not in it."""
    run = Path(tempfile.mkdtemp(prefix="ktsl"))  # short: a unix socket path has at most 107 bytes
    (run / "supervisord.conf").write_text(
        f"[unix_http_server]\nfile={run}/s.sock\nchmod=0700\n\n"
        f"[supervisord]\nlogfile={tmp_path}/supervisord.log\npidfile={run}/s.pid\nchildlogdir={tmp_path}\n\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n"
        f"[supervisorctl]\nserverurl=unix://{run}/s.sock\n\n"
        f"[program:{PROGRAM}]\ncommand=sleep 1000\nstartsecs=0\nstopwaitsecs=5\n"
    )
    subprocess.run(
        [str(VENV / "bin" / "supervisord"), "-c", str(run / "supervisord.conf")], check=True, timeout=60
    )
    try:
        deadline = time.monotonic() + 60
        while _state(run) != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _state(run) == "RUNNING"
        yield run, f"unix://{run}/s.sock"
    finally:
        _ctl(run, "shutdown")
        deadline = time.monotonic() + 30
        while (run / "s.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        subprocess.run(["rm", "-rf", str(run)], check=False)


class Listener:
    """The listener as supervisord starts it (the eventlistener's command line), driven through its stdin."""

    def __init__(self, tmp_path: Path, url: str, burst: int, interval: int):
        self.log = tmp_path / "serve-t.log"
        self.stderr = tmp_path / "start-limit-t.log"
        argv = [sys.executable, str(LISTENER), PROGRAM, str(burst), str(interval), str(self.log)]
        env = {**os.environ, "SUPERVISOR_SERVER_URL": url}
        with self.stderr.open("w") as err:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env
            )
        self.serial = 0
        assert self.proc.stdout.readline() == "READY\n"

    def starting(self, from_state: str, name: str = PROGRAM) -> None:
        """One PROCESS_STATE_STARTING event; returns once the listener answered it (and is READY again)."""
        self.serial += 1
        payload = f"processname:{name} groupname:{name} from_state:{from_state} tries:0"
        header = (
            f"ver:3.0 server:supervisor serial:{self.serial} pool:ktinfra-start-limit-t "
            f"poolserial:{self.serial} eventname:PROCESS_STATE_STARTING len:{len(payload)}\n"
        )
        self.proc.stdin.write(header + payload)
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline() + self.proc.stdout.readline()
        assert answer == "RESULT 2\nOKREADY\n", (answer, self.stderr.read_text())

    def said(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture
def listener(tmp_path):
    made = []

    def start(url: str, burst: int = 3, interval: int = 60) -> Listener:
        made.append(Listener(tmp_path, url, burst, interval))
        return made[-1]

    yield start
    for one in made:
        one.close()


def test_help_names_the_arguments():
    proc = subprocess.run(
        [sys.executable, str(LISTENER), "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage: ktinfra-start-limit [-h] program burst interval log" in proc.stdout
    assert "StartLimitBurst" in proc.stdout


def test_the_start_after_the_burst_of_restarts_is_stopped(supervisord, listener):
    run, url = supervisord
    watch = listener(url, burst=3)
    watch.starting("STOPPED")  # the first start
    watch.starting("EXITED")
    watch.starting("BACKOFF")
    assert _state(run) == "RUNNING" and watch.said() == []
    watch.starting("EXITED")  # the 4th start within 60 s
    assert _state(run) == "STOPPED"
    said = (
        f"ktinfra: {PROGRAM} started 4 times within 60 s, more than the unit's StartLimitBurst=3: stopped; "
        f"`supervisorctl start {PROGRAM}` tries again"
    )
    assert watch.said() == [said]
    assert said in watch.stderr.read_text()

    _ctl(run, "start", PROGRAM)
    for _ in range(3):  # stopping cleared the count: a burst again before the next stop
        watch.starting("EXITED")
    assert _state(run) == "RUNNING" and len(watch.said()) == 1
    watch.starting("EXITED")
    assert _state(run) == "STOPPED" and len(watch.said()) == 2


def test_a_start_by_hand_and_other_programs_do_not_count(supervisord, listener):
    run, url = supervisord
    watch = listener(url, burst=2)
    for _ in range(2):
        watch.starting("STOPPED")  # by hand or an update: a new count
        watch.starting("EXITED")
        watch.starting("EXITED", name="ktinfra-serve-other")
        watch.starting("EXITED", name=f"{PROGRAM}x")
    watch.starting("FATAL")  # `supervisorctl start` of a program given up on
    watch.starting("EXITED")
    assert _state(run) == "RUNNING" and watch.said() == []
    watch.starting("EXITED")
    assert _state(run) == "STOPPED" and len(watch.said()) == 1


def test_starts_older_than_the_interval_are_forgotten(supervisord, listener):
    run, url = supervisord
    watch = listener(url, burst=1, interval=1)
    watch.starting("STOPPED")
    time.sleep(1.5)  # past the interval: the first start no longer counts
    watch.starting("EXITED")
    assert _state(run) == "RUNNING" and watch.said() == []
    watch.starting("EXITED")
    assert _state(run) == "STOPPED"
    assert watch.said()[0].startswith(f"ktinfra: {PROGRAM} started 2 times within 1 s")


def test_a_stop_that_fails_is_said_and_the_count_kept(tmp_path, listener):
    watch = listener(f"unix://{tmp_path}/none.sock", burst=1)
    watch.starting("STOPPED")
    watch.starting("EXITED")
    watch.starting("EXITED")  # still over the limit: tried again
    said = watch.said()
    assert len(said) == 2, said
    assert all(line.startswith(f"ktinfra: could not stop {PROGRAM} at its start limit: ") for line in said)
