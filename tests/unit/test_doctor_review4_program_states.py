"""The supervised-programs check on a program that is not RUNNING gave supervisorctl's line alone ("ktinfra-
serve-q FATAL Exited too quickly (process log may have details)"), with nothing on where that log is or what
to run, and for a program supervisord does not know it said "(supervisorctl update)", which without -c asks
another supervisord (the default /etc/supervisord.conf) or none. Each state now says what it means and the
supervisorctl command line to run. Real testinfra local host; supervisorctl: a stand-in printing `status`."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


@pytest.fixture
def supervisor(tmp_path, monkeypatch):
    sup_dir = tmp_path / "supervisor"
    (sup_dir / "conf.d").mkdir(parents=True)
    (sup_dir / "supervisord.conf").write_text("[supervisord]\n")
    (sup_dir / "conf.d" / "q.conf").write_text("[program:ktinfra-serve-q]\nautostart=true\n")
    ctl = tmp_path / "bin" / "supervisorctl"
    ctl.parent.mkdir()
    monkeypatch.setattr(services, "SUPERVISORCTL", str(ctl))

    def status(line: str) -> str:
        (tmp_path / "said.txt").write_text(line + "\n")
        ctl.write_text(f"#!/bin/sh\ncat {tmp_path / 'said.txt'}\nexit 3\n")
        ctl.chmod(0o755)
        host = testinfra.get_host("local://")
        with pytest.raises(AssertionError) as failed:
            services.test_supervised_programs_running(host, "docker-init", str(sup_dir))
        return str(failed.value).split("\nassert ")[0]

    return status, f"{ctl} -c {sup_dir}/supervisord.conf"


def test_a_fatal_program_names_its_log_and_how_to_start_it(supervisor):
    status, ask = supervisor
    said = status("ktinfra-serve-q   FATAL     Exited too quickly (process log may have details)")
    assert said.startswith("ktinfra-serve-q FATAL Exited too quickly"), said
    assert "supervisord gave up on it" in said, said
    assert f"{ask} tail ktinfra-serve-q" in said and f"{ask} start ktinfra-serve-q" in said, said


def test_a_program_in_backoff_is_said_to_be_restarting(supervisor):
    status, ask = supervisor
    said = status("ktinfra-serve-q   BACKOFF   Exited too quickly (process log may have details)")
    assert "supervisord starts it again" in said and f"{ask} tail ktinfra-serve-q" in said, said
    assert "gave up" not in said, said


def test_a_program_starting_is_said_to_be_starting(supervisor):
    status, _ = supervisor
    said = status("ktinfra-serve-q   STARTING")
    assert said.startswith("ktinfra-serve-q STARTING: still starting"), said


def test_a_stopped_program_says_how_to_start_it(supervisor):
    status, ask = supervisor
    said = status("ktinfra-serve-q   STOPPED   Dec 01 07:00 AM")
    assert f"{ask} start ktinfra-serve-q" in said and "start limit" in said, said


def test_an_unknown_program_is_told_to_update_that_supervisord(supervisor):
    status, ask = supervisor
    said = status("ktinfra-start-limit-q   RUNNING   pid 7, uptime 0:01:00")
    assert said == f"ktinfra-serve-q not known to supervisord: {ask} update", said
