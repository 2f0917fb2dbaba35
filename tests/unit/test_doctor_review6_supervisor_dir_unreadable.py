"""The supervised-programs check (PID 1 not systemd: kt_serve's supervisord fallback) read what doctor may not
read as not there: a supervisor directory it may not enter (0700 root's, doctor run as a normal user) as 'no
supervisord.conf: ... not installed', a conf.d it may not list or a program file it may not read as 'no
program in conf.d is to be started' (the glob matched nothing, or the cat's failure was taken for that). Each
skipped the check while every program was down. Each now fails, naming the path and to run doctor as root.
Real testinfra local host and files, seen as a user who is not root (not_root_host)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from not_root_host import NotRootHost

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


@pytest.fixture
def sup_dir(tmp_path):
    """kt_serve's supervisord layout with one started program; modes put back for pytest's clean-up."""
    path = tmp_path / "supervisor"
    (path / "conf.d").mkdir(parents=True)
    (path / "supervisord.conf").write_text("[supervisord]\n")
    program = path / "conf.d" / "ktinfra-serve-qwen3.conf"
    program.write_text("[program:ktinfra-serve-qwen3]\ncommand=/bin/true\nautostart=true\n")
    yield path
    for each in (path, path / "conf.d", program):
        each.chmod(0o755)


def _failure(sup_dir: Path) -> str:
    """The check's failure message; its skip fails this test instead of skipping it."""
    try:
        services.test_supervised_programs_running(NotRootHost(), "docker-init", str(sup_dir))
    except pytest.skip.Exception as skipped:
        pytest.fail(f"the check was skipped: {skipped}")
    except (pytest.fail.Exception, AssertionError) as failed:
        return str(failed)
    pytest.fail("the check passed")


def test_a_supervisor_dir_doctor_cannot_enter_fails(sup_dir):
    sup_dir.chmod(0o000)
    said = _failure(sup_dir)
    assert said.startswith(f"cannot list supervisord.conf in {sup_dir} ("), said
    assert "Permission denied" in said and "run doctor as root (sudo ktinfra doctor" in said, said


def test_a_conf_d_doctor_cannot_list_fails(sup_dir):
    (sup_dir / "conf.d").chmod(0o000)
    said = _failure(sup_dir)
    assert said.startswith(f"cannot list supervisord's program files in {sup_dir}/conf.d ("), said
    assert "Permission denied" in said, said


def test_a_program_file_doctor_cannot_read_fails(sup_dir):
    program = sup_dir / "conf.d" / "ktinfra-serve-qwen3.conf"
    program.chmod(0o000)
    said = _failure(sup_dir)
    assert said.startswith(f"cannot read supervisord's program file {program} ("), said
    assert "Permission denied" in said, said


def test_a_missing_supervisor_dir_still_skips(tmp_path):
    with pytest.raises(pytest.skip.Exception, match="kt_serve's supervisord fallback is not installed"):
        services.test_supervised_programs_running(NotRootHost(), "docker-init", str(tmp_path / "none"))
