"""Where /proc hides other users' processes (hidepid=2) and doctor is not root, /proc/1/comm is not there,
and every service check was an error quoting testinfra's RuntimeError(CommandResult(... cat -- /proc/1/comm
...)). systemd's own test (sd_booted: /run/systemd/system) now tells systemd apart. The real case runs in
tests/integration/test_doctor_hidden_pid1.py (a systemd container, /proc remounted hidepid=2); here a host
answers the two commands as such a host does."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


class _Host:
    def __init__(self, comm: str | None, systemd_run_dir: bool):
        self.comm, self.systemd_run_dir = comm, systemd_run_dir

    def run(self, command: str):
        if command == "cat /proc/1/comm":
            if self.comm is None:
                return types.SimpleNamespace(rc=1, stdout="", stderr="cat: /proc/1/comm: No such file")
            return types.SimpleNamespace(rc=0, stdout=f"{self.comm}\n", stderr="")
        if command == "test -d /run/systemd/system":
            return types.SimpleNamespace(rc=0 if self.systemd_run_dir else 1, stdout="", stderr="")
        raise AssertionError(f"unexpected command {command!r}")

    def file(self, path: str):  # the old code's way in: as unreadable as on such a host
        raise RuntimeError(f"Unexpected exit code 1 for CommandResult(command=b'cat -- {path}')")


def test_a_hidden_pid_1_under_systemd_is_systemd():
    assert services.pid1_name(_Host(None, True)) == "systemd"


def test_a_hidden_pid_1_without_systemd_is_not_systemd():
    name = services.pid1_name(_Host(None, False))
    assert name != "systemd" and "hidden" in name, name


def test_a_readable_pid_1_is_its_name():
    assert services.pid1_name(_Host("docker-init", True)) == "docker-init"
