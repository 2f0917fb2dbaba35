"""An optional EnvironmentFile=-PATH of a serve unit is passed over when it is not there (as systemd does),
and that was decided by `test -e`, which is false too for a file in a directory doctor may not enter (0700
root's, doctor run as a normal user): the unit's KT_HEALTH_URL there went unread and the check asked its
command line's (or sglang's default) URL instead, failing 'Connection refused' or passing on another server.
It now fails, saying the file cannot be read. Real testinfra local host and files; where this test runs as
root, the commands run without the capabilities that let root past file modes (setpriv), as a normal user
would; `systemctl` on PATH prints what `systemctl show -p EnvironmentFiles|ExecStart --value` prints."""

from __future__ import annotations

import importlib
import os
import shlex
import sys
import types
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")

NO_DAC = "dac_override,-dac_read_search"


class _NotRoot:
    """A testinfra host whose commands run without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH: file modes apply."""

    def __init__(self, host):
        self.host = host

    def run(self, command: str):
        drop = f"setpriv --inh-caps=-{NO_DAC} --bounding-set=-{NO_DAC} sh -c "
        return self.host.run(drop + shlex.quote(command))

    def file(self, path: str):  # testinfra's host.file(PATH).exists, asked the same way
        return types.SimpleNamespace(exists=self.run(f"test -e {shlex.quote(path)}").rc == 0)


@pytest.fixture
def systemctl(tmp_path, monkeypatch):
    def shows(env_line: str) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        tool = bin_dir / "systemctl"
        tool.write_text(f"#!/bin/sh\ncase \"$3\" in EnvironmentFiles) printf '%s\\n' '{env_line}' ;; esac\n")
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")

    return shows


def _user_host():
    host = testinfra.get_host("local://")
    return _NotRoot(host) if os.geteuid() == 0 else host


def test_an_optional_env_file_in_a_closed_directory_fails_with_the_reason(tmp_path, systemctl):
    serve = tmp_path / "serve"
    serve.mkdir()
    (serve / "q.env").write_text("KT_HEALTH_URL=http://127.0.0.1:31000/health\n")
    systemctl(f"{serve}/q.env (ignore_errors=yes)")
    serve.chmod(0o000)
    try:
        with pytest.raises(pytest.fail.Exception) as failed:
            url = services.unit_health_url(_user_host(), "sglang.service")
            pytest.fail(f"no failure: asked {url}")  # not the expected message: the assert below says so
    finally:
        serve.chmod(0o755)
    said = str(failed.value)
    assert said.startswith(f"sglang.service: cannot read its environment file {serve}/q.env"), said
    assert "Permission denied" in said, said


def test_an_optional_env_file_that_is_not_there_is_still_passed_over(tmp_path, systemctl):
    systemctl(f"{tmp_path}/absent.env (ignore_errors=yes)")
    url = services.unit_health_url(_user_host(), "sglang.service")
    assert url == services.DEFAULT_HEALTH_URL
