"""The health check took the first KT_HEALTH_URL assignment it found: in the first environment file of a unit
that set it, and in that file the first line. systemd (and sh, for kt_serve's supervisord programs) leaves
the last one: checked in the debian12-systemd image, EnvironmentFile=c.env (:3) then a.env (:1, then an
indented :2) gives the server KT_HEALTH_URL=...:2. A unit whose port change was appended to its env file
was asked on the old port, and failed 'Connection refused' while it served; where PID 1 is not systemd,
every assignment in a file was asked. Real testinfra local host; `systemctl` on PATH prints what
`systemctl show -p EnvironmentFiles --value UNIT` prints."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


@pytest.fixture
def env_files(tmp_path, monkeypatch):
    def unit_reads(*texts: str) -> None:
        bin_dir, env_dir = tmp_path / "bin", tmp_path / "env"
        bin_dir.mkdir(exist_ok=True)
        env_dir.mkdir(exist_ok=True)
        lines = []
        for i, text in enumerate(texts):
            (env_dir / f"{i}.env").write_text(text)
            lines.append(f"{env_dir / f'{i}.env'} (ignore_errors=no)\n")
        (tmp_path / "files.txt").write_text("".join(lines))
        tool = bin_dir / "systemctl"
        tool.write_text(f'#!/bin/sh\ncase "$3" in EnvironmentFiles) cat {tmp_path / "files.txt"} ;; esac\n')
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")

    return unit_reads


def _url(port: int) -> str:
    return f"http://127.0.0.1:{port}/health"


def test_the_last_assignment_in_a_file_is_asked(env_files):
    env_files(f'KT_SERVE_ARGS="--port 8001"\nKT_HEALTH_URL="{_url(30000)}"\n  KT_HEALTH_URL={_url(8001)}\n')
    assert services.unit_health_url(testinfra.get_host("local://"), "sglang.service") == _url(8001)


def test_a_later_file_wins_over_an_earlier_one(env_files):
    env_files(f'KT_HEALTH_URL="{_url(3)}"\n', "# no URL here\n", f"KT_HEALTH_URL='{_url(2)}'\n", "X=1\n")
    assert services.unit_health_url(testinfra.get_host("local://"), "sglang.service") == _url(2)


def test_supervisord_instances_ask_the_last_assignment_only(tmp_path, monkeypatch):
    env_dir = tmp_path / "serve"
    env_dir.mkdir()
    (env_dir / "q.env").write_text(f'KT_HEALTH_URL="{_url(30000)}"\nKT_HEALTH_URL="{_url(8001)}"\n')
    (env_dir / "r.env").write_text('KT_SERVE_ARGS="--port 8001"\n')  # no KT_HEALTH_URL: asked at its --port
    monkeypatch.setattr(services, "SERVE_ENV_DIR", str(env_dir))
    host = testinfra.get_host("local://")
    assert services.env_file_health_urls(host, str(tmp_path / "supervisor")) == [_url(8001)]
