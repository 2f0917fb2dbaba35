"""kt_serve under supervisord gives up on a server that keeps dying, as the systemd unit's start limit does.

supervisord counts only exits within startsecs (10 s) against startretries. Before, with startretries=1000,
a server that died later (an out-of-memory while loading experts, minutes in) went RUNNING -> EXITED ->
restarted for ever, and one that died at once was retried for days; the unit (StartLimitBurst=3 within
StartLimitIntervalSec) gives up after 3 starts. The real program.conf.j2, rendered by ansible from a unit of
the real template, run by a real supervisord in tmp_path; the server is a script that exits after a while.
"""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from role_play import REPO, run_play

from ktinfra.render.common import render_template
from ktinfra.render.serve import STOP_TIMEOUT_S, _restart_policy

TEMPLATE = REPO / "roles" / "kt_serve" / "templates" / "program.conf.j2"
VENV = Path(sys.executable).parent.parent  # supervisor is a dev dependency: its python runs the listener
LISTENER = REPO / "roles" / "kt_serve" / "files" / "ktinfra_start_limit.py"
LISTENER_SHA1 = hashlib.sha1(LISTENER.read_bytes()).hexdigest()
POLICY = _restart_policy(3600)
BURST = POLICY["start_limit_burst"]
PROGRAM = "ktinfra-serve-t"
# each run leaves "start" and, when it ends by itself, "died" in tmp/runs; with tmp/once, only the first dies
SERVER = """echo start >> {runs}
if [ -e {once} ] && grep -q died {runs}; then exec sleep 1000; fi
sleep "$KT_TEST_RUN_S"
echo died >> {runs}
exit 1
"""


def _unit(server: Path) -> str:
    unit = render_template(
        "systemd/ktinfra-serve@.service.j2",
        python="/usr/bin/python3",
        numactl="/usr/bin/numactl",
        launch_code="pass",
        env_dir="/etc/ktinfra/serve",
        user=None,
        **POLICY,
    )
    return re.sub(r"(?m)^ExecStart=.*$", f"ExecStart=/bin/sh {server}", unit)


def _render(tmp_path: Path, unit: str) -> Path:
    """tmp_path/conf.d/t.conf: program.conf.j2 rendered by ansible from `unit`; the listener: the role's."""
    results = [{"item": {"name": "t"}, "content": base64.b64encode(unit.encode()).decode()}]
    conf = tmp_path / "conf.d" / "t.conf"
    conf.parent.mkdir()
    task = {"ansible.builtin.template": {"src": str(TEMPLATE), "dest": str(conf)}, "loop": "{{ instances }}"}
    extra = {
        "instances": [{"name": "t", "state": "started"}],
        "kt_serve__units": {"results": results},
        "kt_serve_config_dir": str(tmp_path),
        "kt_serve_supervisor_venv": str(VENV),
        "kt_serve__start_limit_path": str(LISTENER),
        "kt_serve__start_limit_sha1": LISTENER_SHA1,
    }
    rc, output = run_play(tmp_path, [task], extra)
    assert rc == 0, output[-3000:]
    return conf


def _ctl(run: Path, *args: str) -> str:
    ctl = [str(VENV / "bin" / "supervisorctl"), "-c", str(run / "supervisord.conf"), *args]
    proc = subprocess.run(ctl, capture_output=True, text=True, timeout=60)
    return proc.stdout


def _state(run: Path) -> str:
    fields = _ctl(run, "status", PROGRAM).split()
    return fields[1] if len(fields) > 1 else ""


def _wait_for(run: Path, want: str, seconds: float = 60) -> str:
    deadline = time.monotonic() + seconds
    while (state := _state(run)) != want and time.monotonic() < deadline:
        time.sleep(0.2)
    return state


def _runs(tmp_path: Path) -> list[str]:
    runs = tmp_path / "runs"
    return runs.read_text().split() if runs.exists() else []


@pytest.fixture
def supervised(tmp_path):
    """A started supervisord with program t as the role writes it (run time: the env file's KT_TEST_RUN_S)."""
    run = Path(tempfile.mkdtemp(prefix="ktsl"))  # short: a unix socket path has at most 107 bytes
    server = tmp_path / "server.sh"
    server.write_text(SERVER.format(runs=tmp_path / "runs", once=tmp_path / "once"))
    conf = _render(tmp_path, _unit(server))
    # the host's paths into tmp_path; startsecs 10 -> 1, so that a run of 3 s dies "late", as a load does
    (tmp_path / "work").mkdir()
    text = conf.read_text().replace("/var/lib/ktinfra/serve/t", str(tmp_path / "work"))
    text = text.replace("/var/log/ktinfra/", f"{tmp_path}/").replace("\nstartsecs=10\n", "\nstartsecs=1\n")
    conf.write_text(text)
    (run / "supervisord.conf").write_text(
        f"[unix_http_server]\nfile={run}/s.sock\nchmod=0700\n\n"
        f"[supervisord]\nlogfile={tmp_path}/supervisord.log\npidfile={run}/s.pid\nchildlogdir={tmp_path}\n\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n"
        f"[supervisorctl]\nserverurl=unix://{run}/s.sock\n\n[include]\nfiles = {conf.parent}/*.conf\n"
    )

    def start(run_s: int) -> None:
        (tmp_path / "t.env").write_text(f"KT_TEST_RUN_S={run_s}\n")
        supervisord = [str(VENV / "bin" / "supervisord"), "-c", str(run / "supervisord.conf")]
        subprocess.run(supervisord, check=True, timeout=60)

    try:
        yield run, start
    finally:
        _ctl(run, "shutdown")
        deadline = time.monotonic() + 30
        while (run / "s.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        subprocess.run(["rm", "-rf", str(run)], check=False)


def test_a_server_that_keeps_dying_late_is_stopped_at_the_units_start_limit(tmp_path, supervised):
    run, start = supervised
    start(3)  # each run is RUNNING (past startsecs), then exits 1
    state = _wait_for(run, "STOPPED")
    assert state == "STOPPED", f"{state}: {len(_runs(tmp_path))} runs: {_runs(tmp_path)}"
    assert _runs(tmp_path).count("died") == BURST  # the start after the 3rd is stopped at once
    log = (tmp_path / "serve-t.log").read_text()
    assert f"{PROGRAM} started {BURST + 1} times within {POLICY['start_limit_interval_s']} s" in log, log
    time.sleep(4)  # more than a run: nothing started it again
    assert _state(run) == "STOPPED" and _runs(tmp_path).count("died") == BURST

    _ctl(run, "start", PROGRAM)  # by hand: a new count, as systemctl reset-failed + start
    assert _wait_for(run, "STOPPED") == "STOPPED"
    assert _runs(tmp_path).count("died") == 2 * BURST


def test_a_server_that_dies_at_once_ends_fatal_after_the_burst(tmp_path, supervised):
    run, start = supervised
    start(0)
    state = _wait_for(run, "FATAL")
    assert state == "FATAL", f"{state}: {len(_runs(tmp_path))} runs"
    assert _runs(tmp_path).count("start") == BURST


def test_a_server_that_served_and_then_crashed_once_is_restarted(tmp_path, supervised):
    run, start = supervised
    (tmp_path / "once").touch()
    start(3)
    deadline = time.monotonic() + 60
    while _runs(tmp_path) != ["start", "died", "start"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _wait_for(run, "RUNNING") == "RUNNING", _runs(tmp_path)
    time.sleep(2)  # past startsecs: it stays RUNNING
    assert _state(run) == "RUNNING" and _runs(tmp_path).count("died") == 1


def _conf_line(conf: Path, key: str) -> str:
    return next(line for line in conf.read_text().splitlines() if line.startswith(key + "="))


def test_the_program_stops_with_the_grace_of_the_units_timeout_stop_sec(tmp_path):
    """Before, stopwaitsecs=60: supervisord killed a server that was still shutting down after 60 s, where
    systemd (TimeoutStopSec=STOP_TIMEOUT_S) waits 120 s."""
    unit = _unit(tmp_path / "server.sh")
    assert f"\nTimeoutStopSec={STOP_TIMEOUT_S}\n" in unit
    assert _conf_line(_render(tmp_path, unit), "stopwaitsecs") == f"stopwaitsecs={STOP_TIMEOUT_S}"

    other = tmp_path / "other"
    other.mkdir()
    unit = re.sub(r"(?m)^TimeoutStopSec=.*$", "TimeoutStopSec=300", unit)
    assert _conf_line(_render(other, unit), "stopwaitsecs") == "stopwaitsecs=300"


def test_the_listener_runs_from_its_installed_file_with_the_venvs_python(tmp_path):
    """Before, the listener was a base64 blob in the command line (`python -c "...exec(...)"`)."""
    conf = _render(tmp_path, _unit(tmp_path / "server.sh"))
    section = conf.read_text().split("[eventlistener:ktinfra-start-limit-t]\n")[1]
    command = f"{VENV}/bin/python {LISTENER} {PROGRAM} {BURST} {POLICY['start_limit_interval_s']} "
    assert section.startswith(f"command={command}/var/log/ktinfra/serve-t.log\n"), section
    # its sha1 in the environment: `supervisorctl update` restarts the listener when the file changed
    assert f'\nenvironment=KTINFRA_START_LIMIT_SHA1="{LISTENER_SHA1}"\n' in section
