"""kt_serve under supervisord waits for each started program to settle, fails naming one not RUNNING.

supervisord reports a program STARTING for startsecs and BACKOFF between quick failures, FATAL only after
startretries. Before, the role read `supervisorctl status` right after `update`, took STARTING/BACKOFF as up
and passed with a server that never ran, or read FATAL a moment later and failed on `supervisorctl start`
with "ERROR (spawn error)" and no reason. The real tasks of roles/kt_serve/tasks/supervisor.yml from starting
supervisord on, run by ansible on a real supervisord in tmp_path.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from role_play import REPO, run_play

TASKS = REPO / "roles" / "kt_serve" / "tasks" / "supervisor.yml"
VENV = Path(sys.executable).parent.parent  # supervisor is a dev dependency
PROGRAM = "ktinfra-serve-t"
SECRET = "sekrit-not-to-be-shown"
FAILING = f"""echo "server_args=ServerArgs(port=30000, api_key='{SECRET}')"
echo "ModuleNotFoundError: No module named 'sglang'"
exit 1
"""
SERVING = "exec sleep 1000\n"


def _tasks() -> list:
    """The tasks from starting supervisord to the end, less the env-file restarts (kt_common, handlers)."""
    tasks = yaml.safe_load(TASKS.read_text())
    names = [t["name"] for t in tasks]
    first = names.index("Start supervisord unless it runs")
    skip = {
        "Name the instances whose environment changed since they were started",
        "Queue restarts of instances whose environment changed",
        "Apply restarts before waiting for health",
    }
    return [t for t in tasks[first:] if t["name"] not in skip]


def _ctl(run: Path, *args: str) -> str:
    ctl = [str(VENV / "bin" / "supervisorctl"), "-c", str(run / "supervisord.conf"), *args]
    return subprocess.run(ctl, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture
def supervisor(tmp_path):
    """supervisord.conf and program t (startsecs 1, startretries 2: the unit's burst of 3) in a short dir;
    the role's tasks start supervisord. Yields (run dir, a function that writes the server's script)."""
    run = Path(tempfile.mkdtemp(prefix="ktst"))  # short: a unix socket path has at most 107 bytes
    (run / "conf.d").mkdir()
    server = tmp_path / "server.sh"
    (run / "conf.d" / f"{PROGRAM}.conf").write_text(
        f"[program:{PROGRAM}]\ncommand=/bin/sh {server}\ndirectory={tmp_path}\nautostart=true\n"
        "autorestart=true\nstartsecs=1\nstartretries=2\nredirect_stderr=true\n"
        f"stdout_logfile={tmp_path}/serve-t.log\n"
    )
    (run / "supervisord.conf").write_text(
        f"[unix_http_server]\nfile={run}/s.sock\nchmod=0700\n\n"
        f"[supervisord]\nlogfile={tmp_path}/supervisord.log\npidfile={run}/s.pid\nchildlogdir={tmp_path}\n\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n"
        f"[supervisorctl]\nserverurl=unix://{run}/s.sock\n\n[include]\nfiles = {run}/conf.d/*.conf\n"
    )
    try:
        yield run, server.write_text
    finally:
        _ctl(run, "shutdown")
        deadline = time.monotonic() + 30
        while (run / "s.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        subprocess.run(["rm", "-rf", str(run)], check=False)


def _run_role_tasks(tmp_path: Path, run: Path) -> tuple[int, str]:
    extra = {
        "kt_serve_supervisor_venv": str(VENV),
        "kt_serve_supervisor_dir": str(run),
        "kt_serve__present": [{"name": "t", "state": "started"}],
        "kt_serve_instances": [{"name": "t", "api_key": SECRET}],
    }
    return run_play(tmp_path, _tasks(), extra)


def test_a_program_that_fails_at_once_fails_the_run_naming_it_with_its_log(tmp_path, supervisor):
    run, write_server = supervisor
    write_server(FAILING)
    rc, output = _run_role_tasks(tmp_path, run)
    assert rc != 0, output[-3000:]
    assert f"{PROGRAM} FATAL" in output and "not running under supervisord" in output, output[-3000:]
    assert "No module named 'sglang'" in output, output[-3000:]
    assert SECRET not in output, output[-3000:]
    assert _ctl(run, "status", PROGRAM).split()[1] == "FATAL"


def test_a_program_that_stays_up_passes(tmp_path, supervisor):
    run, write_server = supervisor
    write_server(SERVING)
    rc, output = _run_role_tasks(tmp_path, run)
    assert rc == 0, output[-3000:]
    assert _ctl(run, "status", PROGRAM).split()[1] == "RUNNING"
