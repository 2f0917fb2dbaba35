"""The supervised-programs check asked supervisord with /opt/ktinfra/envs/supervisor/bin/supervisorctl, the
default kt_serve_supervisor_venv, whatever venv the role was run with: on a host set up with another one
(kt_serve_supervisor_venv=/srv/sup) it failed '/opt/ktinfra/envs/supervisor/bin/supervisorctl is missing'
while supervisord ran every program. kt_serve writes the venv into each program's conf (its start-limit
event listener runs the venv's python), which the check now reads. Real testinfra local host; the venv's
supervisorctl is a stand-in printing what `supervisorctl status` prints."""

from __future__ import annotations

import base64
import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")

# the event listener's command as kt_serve's program.conf.j2 writes it: inline, and (newer) as a file
LISTENERS = {
    "inline": "{venv}/bin/python -c \"import base64; exec(base64.b64decode('aW1wb3J0IHN5cw=='))\" "
    "ktinfra-serve-qwen3 3 600 /var/log/ktinfra/serve-qwen3.log",
    "file": "{venv}/bin/python {venv}/bin/ktinfra-start-limit ktinfra-serve-qwen3 3 600 "
    "/var/log/ktinfra/serve-qwen3.log",
}


def _supervisor(tmp_path, monkeypatch, listener: str, status: str) -> Path:
    venv = tmp_path / "srv-sup"  # supervisord splits command= on spaces: a venv path has none
    sup_dir = tmp_path / "supervisor"
    (sup_dir / "conf.d").mkdir(parents=True)
    (sup_dir / "supervisord.conf").write_text("[supervisord]\n")
    (sup_dir / "conf.d" / "ktinfra-serve-qwen3.conf").write_text(
        "[program:ktinfra-serve-qwen3]\ncommand=/bin/sh -c 'exec sleep 1'\nautostart=true\n\n"
        f"[eventlistener:ktinfra-start-limit-qwen3]\ncommand={LISTENERS[listener].format(venv=venv)}\n"
        "events=PROCESS_STATE_STARTING\n"
    )
    ctl = venv / "bin" / "supervisorctl"
    ctl.parent.mkdir(parents=True)
    (tmp_path / "said.txt").write_text(status)
    ctl.write_text(f"#!/bin/sh\ncat '{tmp_path / 'said.txt'}'\n")
    ctl.chmod(0o755)
    monkeypatch.setattr(services, "SUPERVISOR_DIR", str(sup_dir))
    return venv


@pytest.mark.parametrize("listener", sorted(LISTENERS))
def test_the_venv_the_role_used_is_asked(tmp_path, monkeypatch, capsys, listener):
    running = (
        "ktinfra-serve-qwen3              RUNNING   pid 42, uptime 0:10:00\n"
        "ktinfra-start-limit-qwen3        RUNNING   pid 41, uptime 0:10:00\n"
    )
    _supervisor(tmp_path, monkeypatch, listener, running)
    services.test_supervised_programs_running(
        testinfra.get_host("local://"), "docker-init", services.SUPERVISOR_DIR
    )
    assert "supervised programs running: ktinfra-serve-qwen3" in capsys.readouterr().out


def test_a_supervisord_that_is_down_is_told_to_start_from_that_venv(tmp_path, monkeypatch):
    refused = "unix:///run/ktinfra-supervisor.sock refused connection"
    venv = _supervisor(tmp_path, monkeypatch, "inline", refused)
    with pytest.raises(pytest.fail.Exception) as failed:
        services.test_supervised_programs_running(
            testinfra.get_host("local://"), "docker-init", services.SUPERVISOR_DIR
        )
    said = str(failed.value)
    assert f"run {venv}/bin/supervisord -c " in said, said


def test_programs_without_a_listener_still_use_the_default_venv(tmp_path, monkeypatch):
    """A conf from before the event listener names no venv: the default's supervisorctl is asked."""
    sup_dir = tmp_path / "supervisor"
    (sup_dir / "conf.d").mkdir(parents=True)
    (sup_dir / "supervisord.conf").write_text("[supervisord]\n")
    (sup_dir / "conf.d" / "q.conf").write_text("[program:ktinfra-serve-q]\nautostart=true\n")
    monkeypatch.setattr(services, "SUPERVISOR_DIR", str(sup_dir))
    monkeypatch.setattr(services, "SUPERVISORCTL", str(tmp_path / "none" / "bin" / "supervisorctl"))
    with pytest.raises(pytest.fail.Exception) as failed:
        services.test_supervised_programs_running(
            testinfra.get_host("local://"), "docker-init", services.SUPERVISOR_DIR
        )
    assert str(failed.value).startswith(f"{tmp_path}/none/bin/supervisorctl is missing"), str(failed.value)


def test_the_venv_is_read_from_the_program_conf_the_role_writes(tmp_path, monkeypatch):
    """The real program.conf.j2, rendered by ansible with kt_serve_supervisor_venv=/srv/sup: the check's
    reading of it names that venv (a change of the template's listener line shows here)."""
    from role_play import REPO, run_play

    unit = "[Service]\nExecStart=/bin/true\nStartLimitBurst=3\nStartLimitIntervalSec=600\nTimeoutStopSec=60\n"
    results = [{"item": {"name": "q"}, "content": base64.b64encode(unit.encode()).decode()}]
    conf = tmp_path / "supervisor" / "conf.d" / "ktinfra-serve-q.conf"
    conf.parent.mkdir(parents=True)
    template = REPO / "roles" / "kt_serve" / "templates" / "program.conf.j2"
    task = {"ansible.builtin.template": {"src": str(template), "dest": str(conf)}, "loop": "{{ instances }}"}
    extra = {
        "instances": [{"name": "q", "state": "started"}],
        "kt_serve__units": {"results": results},
        "kt_serve_config_dir": str(tmp_path),
        "kt_serve_supervisor_venv": "/srv/sup",
        "kt_serve__start_limit_path": "/srv/sup/bin/ktinfra-start-limit",
        "kt_serve__start_limit_sha1": "0" * 40,
    }
    rc, output = run_play(tmp_path, [task], extra)
    assert rc == 0, output[-3000:]
    monkeypatch.setattr(services, "SUPERVISOR_DIR", str(conf.parent.parent))
    host = testinfra.get_host("local://")
    assert services.supervisor_venvs(host) == ["/srv/sup"]
    assert services.supervisorctl_path(host) == "/srv/sup/bin/supervisorctl"
    assert services.program_env_files(host) == {"q": f"{tmp_path}/q.env"}  # kt_serve_config_dir
