"""The host suite's supervised-programs check (PID 1 not systemd: AutoDL containers, kt_serve's supervisord
fallback) ran `supervisorctl status` unbounded: supervisorctl waits on supervisord's socket without end, so a
supervisord that accepts and never answers (stopped by SIGSTOP, stuck on a hung disk) held the check, and
doctor, for good. Real testinfra local host; supervisorctl is a script that never answers."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


@pytest.fixture
def hung_supervisord(tmp_path, monkeypatch):
    sup_dir = tmp_path / "supervisor"
    (sup_dir / "conf.d").mkdir(parents=True)
    (sup_dir / "supervisord.conf").write_text("[supervisord]\n")
    (sup_dir / "conf.d" / "qwen3.conf").write_text("[program:ktinfra-serve-qwen3]\nautostart=true\n")
    pid_file = tmp_path / "ctl.pid"
    ctl = tmp_path / "bin" / "supervisorctl"
    ctl.parent.mkdir()
    ctl.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 120\n")
    ctl.chmod(0o755)
    monkeypatch.setattr(services, "SUPERVISOR_DIR", str(sup_dir))
    monkeypatch.setattr(services, "SUPERVISORCTL", str(ctl))
    monkeypatch.setattr(services, "SUPERVISORCTL_TIMEOUT", 2, raising=False)
    yield sup_dir
    if pid_file.exists():  # the old check's sleep, left behind when the thread gave up waiting
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def test_a_supervisord_that_never_answers_fails_the_check_in_bounded_time(hung_supervisord):
    host = testinfra.get_host("local://")
    outcome = {}

    def check():
        try:
            services.test_supervised_programs_running(host, "docker-init", services.SUPERVISOR_DIR)
            outcome["result"] = "passed"
        except BaseException as exc:  # pytest.fail's Failed is a BaseException
            outcome["result"] = exc

    thread = threading.Thread(target=check, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the check still waits on supervisorctl after 30 s"
    failed = outcome["result"]
    assert isinstance(failed, pytest.fail.Exception), failed
    assert str(failed).startswith("supervisord does not answer within 2 s ("), str(failed)
    assert f"-c {hung_supervisord}/supervisord.conf" in str(failed)
