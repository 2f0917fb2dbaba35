"""kt_serve under supervisord honours each instance's `state:` on every run, as systemd's `state:` does: a
started instance whose program is down (stopped by hand, or FATAL) is started, a stopped one's program that
runs is stopped. `supervisorctl update` acts only on programs whose conf changed, so before, both stayed as
they were. The role's own tasks, run for real on localhost against a real supervisord in tmp folders."""

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
FIRST = "Load program changes (supervisord restarts changed programs itself)"
AFTER = "Name the instances whose environment changed since they were started"


def _after_update() -> list:
    """supervisor.yml's tasks from `supervisorctl update` up to the restart bookkeeping."""
    tasks = yaml.safe_load(TASKS.read_text())
    names = [t.get("name") for t in tasks]
    return tasks[names.index(FIRST) : names.index(AFTER)]


@pytest.fixture(scope="module")
def supervisor_venv(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("sv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "supervisor==4.3.0"], check=True, timeout=300)
    return venv


PROGRAM = """[program:ktinfra-serve-{name}]
command=/bin/sleep 1000
autostart={autostart}
autorestart=true
startsecs=1
stopasgroup=true
killasgroup=true
"""


def _ctl(venv: Path, conf: Path, *args: str) -> str:
    ctl = [str(venv / "bin" / "supervisorctl"), "-c", str(conf), *args]
    return subprocess.run(ctl, capture_output=True, text=True, timeout=60).stdout


def _state(venv: Path, conf: Path, program: str, want: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = _ctl(venv, conf, "status", program).split()
        if len(status) > 1 and status[1] == want:
            break
        time.sleep(0.2)
    return status[1] if len(status) > 1 else " ".join(status)


def test_a_started_instance_stopped_by_hand_is_started_and_a_stopped_one_is_stopped(
    tmp_path, supervisor_venv
):
    run = Path(tempfile.mkdtemp(prefix="ktsv"))  # short: a unix socket path has at most 107 bytes
    conf_dir = tmp_path / "supervisor"
    (conf_dir / "conf.d").mkdir(parents=True)
    conf = conf_dir / "supervisord.conf"
    conf.write_text(
        f"[unix_http_server]\nfile={run}/s.sock\nchmod=0700\n\n"
        f"[supervisord]\nlogfile={tmp_path}/supervisord.log\npidfile={run}/s.pid\nchildlogdir={tmp_path}\n\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n"
        f"[supervisorctl]\nserverurl=unix://{run}/s.sock\n\n[include]\nfiles = {conf_dir}/conf.d/*.conf\n"
    )
    (conf_dir / "conf.d" / "ktinfra-serve-up.conf").write_text(PROGRAM.format(name="up", autostart="true"))
    (conf_dir / "conf.d" / "ktinfra-serve-down.conf").write_text(
        PROGRAM.format(name="down", autostart="false")
    )
    subprocess.run([str(supervisor_venv / "bin" / "supervisord"), "-c", str(conf)], check=True, timeout=60)
    try:
        assert _state(supervisor_venv, conf, "ktinfra-serve-up", "RUNNING") == "RUNNING"
        _ctl(supervisor_venv, conf, "stop", "ktinfra-serve-up")  # the admin's hand, or FATAL
        _ctl(supervisor_venv, conf, "start", "ktinfra-serve-down")
        assert _state(supervisor_venv, conf, "ktinfra-serve-down", "RUNNING") == "RUNNING"
        extra = {
            "kt_serve_supervisor_venv": str(supervisor_venv),
            "kt_serve_supervisor_dir": str(conf_dir),
            "kt_serve__present": [{"name": "up", "state": "started"}, {"name": "down", "state": "stopped"}],
        }
        rc, output = run_play(tmp_path, _after_update(), extra)
        assert rc == 0, output[-3000:]
        assert _state(supervisor_venv, conf, "ktinfra-serve-up", "RUNNING") == "RUNNING", output[-3000:]
        assert _state(supervisor_venv, conf, "ktinfra-serve-down", "STOPPED") == "STOPPED", output[-3000:]
        rc, output = run_play(tmp_path, _after_update(), extra)  # nothing left to do: nothing changes
        assert rc == 0 and "changed=0" in output, output[-3000:]
        assert "skipped=1" in output, output[-3000:]  # the start/stop task: nothing to start or stop
    finally:
        _ctl(supervisor_venv, conf, "shutdown")
        deadline = time.monotonic() + 30
        while (run / "s.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        subprocess.run(["rm", "-rf", str(run)], check=False)
