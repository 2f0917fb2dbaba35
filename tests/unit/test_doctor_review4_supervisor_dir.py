"""kt_serve_supervisor_dir other than /etc/ktinfra/supervisor: the supervised-programs check looked there
only, skipped as 'kt_serve's supervisord fallback is not installed', and doctor passed with every program
down. `ktinfra doctor --supervisor-dir DIR` (the suite's --kt-supervisor-dir) names it; the skip says so."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra
from typer.testing import CliRunner

from ktinfra import doctor
from ktinfra.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


def test_the_option_reaches_the_suite(monkeypatch):
    seen = {}

    def run(hosts, role, profile, **options):
        seen.update(options)
        raise doctor.DoctorError("stop here")

    monkeypatch.setattr(doctor, "run", run)
    result = CliRunner().invoke(app, ["doctor", "--supervisor-dir", "/srv/supervisor"])
    assert result.exit_code == 1 and seen["supervisor_dir"] == "/srv/supervisor", result.output
    args = doctor.pytest_args(Path("/s"), Path("/j.xml"), ["local://"], "any", "kt-0.7", seen)
    assert "--kt-supervisor-dir=/srv/supervisor" in args


@pytest.mark.parametrize(
    ("given", "said"),
    [(" ", "--supervisor-dir is empty"), ("etc/sup", "--supervisor-dir 'etc/sup': give its absolute path")],
)
def test_an_empty_or_relative_dir_is_refused_before_the_suite_runs(monkeypatch, given, said):
    monkeypatch.setattr(doctor.subprocess, "run", lambda *a, **k: pytest.fail("suite must not start"))
    with pytest.raises(doctor.DoctorError, match=said):
        doctor.run(["local://"], "any", supervisor_dir=given)


def test_the_check_reads_the_dir_it_is_given(tmp_path, capsys):
    sup_dir, venv = tmp_path / "sup", tmp_path / "venv"
    (sup_dir / "conf.d").mkdir(parents=True)
    (sup_dir / "supervisord.conf").write_text("[supervisord]\n")
    (sup_dir / "conf.d" / "q.conf").write_text(
        "[program:ktinfra-serve-q]\nautostart=true\n[eventlistener:ktinfra-start-limit-q]\n"
        f"command={venv}/bin/python -c pass ktinfra-serve-q 3 600 /var/log/ktinfra/serve-q.log\n"
    )
    ctl = venv / "bin" / "supervisorctl"
    ctl.parent.mkdir(parents=True)
    ctl.write_text(
        "#!/bin/sh\necho 'ktinfra-serve-q  RUNNING  pid 9, uptime 0:01:00'\n"
        "echo 'ktinfra-start-limit-q  RUNNING  pid 8, uptime 0:01:00'\n"
    )
    ctl.chmod(0o755)
    host = testinfra.get_host("local://")
    services.test_supervised_programs_running(host, "docker-init", str(sup_dir))
    assert "supervised programs running: ktinfra-serve-q" in capsys.readouterr().out
    with pytest.raises(pytest.skip.Exception) as skipped:
        services.test_supervised_programs_running(host, "docker-init", str(tmp_path / "elsewhere"))
    assert "ktinfra doctor --supervisor-dir DIR" in str(skipped.value)
