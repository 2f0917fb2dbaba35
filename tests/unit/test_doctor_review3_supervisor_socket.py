"""The supervised-programs check run as a user who may not open kt_serve's supervisord socket (chmod 0700,
root's): supervisorctl says 'error: <class 'PermissionError'>, [Errno 13] Permission denied', and the check
said 'supervisord does not answer (...): nothing starts it without systemd; run supervisord -c CONF', which
is false (it runs) and would start a second one. Real testinfra local host; supervisorctl is a stand-in
printing what supervisorctl 4 prints when connect() is refused with EACCES (its onecmd's 'error: TYPE,
VALUE: TRACEBACK' line on stdout; this test runs as root, whom a 0700 socket does not stop), or, for a
supervisord that is down, its 'refused connection'."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")

DENIED = (
    "error: <class 'PermissionError'>, [Errno 13] Permission denied: file: "
    "/opt/ktinfra/envs/supervisor/lib/python3.11/site-packages/supervisor/xmlrpc.py line: 560"
)


def _supervisor(tmp_path, monkeypatch, says: str) -> None:
    sup_dir = tmp_path / "supervisor"
    (sup_dir / "conf.d").mkdir(parents=True)
    (sup_dir / "supervisord.conf").write_text("[supervisord]\n")
    (sup_dir / "conf.d" / "qwen3.conf").write_text("[program:ktinfra-serve-qwen3]\nautostart=true\n")
    ctl = tmp_path / "bin" / "supervisorctl"
    ctl.parent.mkdir()
    (tmp_path / "said.txt").write_text(says + "\n")
    ctl.write_text(f"#!/bin/sh\ncat {tmp_path / 'said.txt'}\nexit 2\n")
    ctl.chmod(0o755)
    monkeypatch.setattr(services, "SUPERVISOR_DIR", str(sup_dir))
    monkeypatch.setattr(services, "SUPERVISORCTL", str(ctl))


def test_a_socket_we_may_not_open_says_run_as_root(tmp_path, monkeypatch):
    _supervisor(tmp_path, monkeypatch, DENIED)
    host = testinfra.get_host("local://")
    with pytest.raises(pytest.fail.Exception) as failed:
        services.test_supervised_programs_running(host, "docker-init", services.SUPERVISOR_DIR)
    said = str(failed.value)
    assert said.startswith("cannot ask supervisord (error: <class 'PermissionError'>"), said
    assert "run doctor as root" in said and "nothing starts it" not in said


def test_a_supervisord_that_is_down_is_still_told_how_to_start(tmp_path, monkeypatch):
    _supervisor(tmp_path, monkeypatch, "unix:///run/ktinfra-supervisor.sock refused connection")
    host = testinfra.get_host("local://")
    with pytest.raises(pytest.fail.Exception) as failed:
        services.test_supervised_programs_running(host, "docker-init", services.SUPERVISOR_DIR)
    assert "supervisord does not answer (unix://" in str(failed.value)
