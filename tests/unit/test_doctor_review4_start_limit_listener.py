"""kt_serve's start-limit event listener (one per program: it stops a server that keeps dying at the unit's
StartLimitBurst) was not looked at: with it FATAL (its venv's python or script gone) the supervised-programs
check passed while a crash-looping server would be restarted without end. The listener of each program to be
started must now be RUNNING too. Real testinfra local host; supervisorctl: a stand-in printing `status`."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")

RUNNING = "RUNNING   pid 9, uptime 0:01:00"


@pytest.fixture
def supervisor(tmp_path):
    sup_dir, venv = tmp_path / "sup", tmp_path / "venv"
    (sup_dir / "conf.d").mkdir(parents=True)
    (sup_dir / "supervisord.conf").write_text("[supervisord]\n")
    for name, start in (("q", "true"), ("spare", "false")):
        (sup_dir / "conf.d" / f"ktinfra-serve-{name}.conf").write_text(
            f"[program:ktinfra-serve-{name}]\ncommand=/bin/sh -c true\nautostart={start}\n\n"
            f"[eventlistener:ktinfra-start-limit-{name}]\n"
            f"command={venv}/bin/python -c pass ktinfra-serve-{name} 3 600 x\n"
        )
    ctl = venv / "bin" / "supervisorctl"
    ctl.parent.mkdir(parents=True)

    def check(*lines: str) -> None:
        (tmp_path / "said.txt").write_text("".join(line + "\n" for line in lines))
        ctl.write_text(f"#!/bin/sh\ncat {tmp_path / 'said.txt'}\n")
        ctl.chmod(0o755)
        services.test_supervised_programs_running(testinfra.get_host("local://"), "docker-init", str(sup_dir))

    return check


def test_a_fatal_start_limit_listener_fails_the_check(supervisor):
    with pytest.raises(AssertionError) as failed:
        supervisor(f"ktinfra-serve-q  {RUNNING}", "ktinfra-start-limit-q  FATAL  Exited too quickly")
    said = str(failed.value).split("\nassert ")[0]
    assert said.startswith("ktinfra-start-limit-q FATAL Exited too quickly"), said


def test_running_programs_and_listeners_pass(supervisor, capsys):
    """The stopped instance's listener is not asked for (its program is not to be started)."""
    supervisor(f"ktinfra-serve-q  {RUNNING}", f"ktinfra-start-limit-q  {RUNNING}")
    assert "supervised programs running: ktinfra-serve-q, ktinfra-start-limit-q" in capsys.readouterr().out
