"""The supervised-programs check read kt_serve's conf.d by grepping 'autostart=' lines, whichever section they
stood in: an event listener section's autostart= after its program's decided the program's (a program set to
stopped, autostart=false, was read as to be started, and the check failed on it), 'autostart = false' (spaces,
as supervisord accepts it) was not seen, nor was a program without autostart= (supervisord's default: true).
conf.d is now read as supervisord reads it (RawConfigParser, ';'/'#' inline comments). Real testinfra local
host, conf files under tmp_path."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


@pytest.fixture
def conf_d(tmp_path):
    sup_dir = tmp_path / "supervisor"
    (sup_dir / "conf.d").mkdir(parents=True)

    def write(name: str, text: str) -> str:
        (sup_dir / "conf.d" / f"{name}.conf").write_text(text)
        return str(sup_dir)

    return write


def _host():
    return testinfra.get_host("local://")


@pytest.mark.parametrize(("program", "listener"), [("false", "true"), ("true", "false")])
def test_autostart_is_the_programs_own_not_its_listeners(conf_d, program, listener):
    sup_dir = conf_d(
        "q",
        f"[program:ktinfra-serve-q]\ncommand=/bin/true\nautostart={program}\n\n"
        f"[eventlistener:ktinfra-start-limit-q]\ncommand=/v/bin/python /l.py\nautostart={listener}\n",
    )
    assert services.program_autostart(_host(), sup_dir) == {"ktinfra-serve-q": program == "true"}
    assert services.stopped_instances(_host(), sup_dir) == ([] if program == "true" else ["q"])


def test_autostart_written_as_supervisord_accepts_it(conf_d):
    conf_d("a", "[program:ktinfra-serve-a]\nautostart = false ; set to stopped\n")
    conf_d("b", "[program:ktinfra-serve-b]\nAutoStart=Off\n")
    sup_dir = conf_d("c", "[program:ktinfra-serve-c]\ncommand=/bin/true\n")
    assert services.program_autostart(_host(), sup_dir) == {
        "ktinfra-serve-a": False,
        "ktinfra-serve-b": False,
        "ktinfra-serve-c": True,
    }


def test_commands_are_read_per_section(conf_d):
    sup_dir = conf_d(
        "q",
        "[program:ktinfra-serve-q]\ncommand = /bin/sh -c 'set -a; . /srv/env/q.env; set +a; exec x'\n"
        "[eventlistener:ktinfra-start-limit-q]\ncommand = /opt/sv/bin/python /l.py q 5 600 /q.log\n",
    )
    assert services.program_env_files(_host(), sup_dir) == {"q": "/srv/env/q.env"}
    assert services.supervisor_venvs(_host(), sup_dir) == ["/opt/sv"]


def test_a_conf_supervisord_cannot_read_fails_with_its_path(conf_d):
    sup_dir = conf_d("q", "autostart=true\n")
    with pytest.raises(pytest.fail.Exception, match=r"supervisord cannot read .*/conf\.d/q\.conf"):
        services.program_autostart(_host(), sup_dir)


def test_no_conf_files_means_no_programs(conf_d, tmp_path):
    assert services.program_autostart(_host(), str(tmp_path / "nothing")) == {}
