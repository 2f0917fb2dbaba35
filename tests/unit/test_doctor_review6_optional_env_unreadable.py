"""An optional EnvironmentFile=-PATH of a serve unit is passed over when it is not there (as systemd does),
and that was decided by `test -e`, which is false too for a file in a directory doctor may not enter (0700
root's, doctor run as a normal user): the unit's KT_HEALTH_URL there went unread and the check asked its
command line's (or sglang's default) URL instead, failing 'Connection refused' or passing on another server.
It now fails, saying the file cannot be read. Real testinfra local host and files, seen as a user who is not
root (not_root_host); `systemctl` on PATH prints what `systemctl show -p EnvironmentFiles --value` prints."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from not_root_host import NotRootHost

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


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


def test_an_optional_env_file_in_a_closed_directory_fails_with_the_reason(tmp_path, systemctl):
    serve = tmp_path / "serve"
    serve.mkdir()
    (serve / "q.env").write_text("KT_HEALTH_URL=http://127.0.0.1:31000/health\n")
    systemctl(f"{serve}/q.env (ignore_errors=yes)")
    serve.chmod(0o000)
    try:
        with pytest.raises(pytest.fail.Exception) as failed:
            url = services.unit_health_url(NotRootHost(), "sglang.service")
            pytest.fail(f"no failure: asked {url}")  # not the expected message: the assert below says so
    finally:
        serve.chmod(0o755)
    said = str(failed.value)
    assert said.startswith(f"sglang.service: cannot read its environment file {serve}/q.env"), said
    assert "Permission denied" in said, said


def test_an_optional_env_file_that_is_not_there_is_still_passed_over(tmp_path, systemctl):
    systemctl(f"{tmp_path}/absent.env (ignore_errors=yes)")
    url = services.unit_health_url(NotRootHost(), "sglang.service")
    assert url == services.DEFAULT_HEALTH_URL
