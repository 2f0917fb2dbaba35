"""The health check of a hand-made sglang unit (no KT_HEALTH_URL in an env file) asked sglang's default
http://127.0.0.1:30000/health whatever port its command line serves on: a unit running `sglang.launch_server
--port 8000` failed 'Connection refused' while it answered. Real testinfra local host; `systemctl` on PATH
prints what `systemctl show -p EnvironmentFiles|ExecStart --value UNIT` prints."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


@pytest.fixture
def unit_argv(tmp_path, monkeypatch):
    def runs(argv: str) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        shown = (
            f"{{ path=/opt/venv/bin/python ; argv[]={argv} ; ignore_errors=no ; start_time=[n/a] ; "
            "stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }"
        )
        tool = bin_dir / "systemctl"
        tool.write_text(f'#!/bin/sh\ncase "$3" in ExecStart) printf "%s\\n" \'{shown}\' ;; esac\n')
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")

    return runs


@pytest.mark.parametrize(
    ("argv", "url"),
    [
        (
            "/opt/venv/bin/python -m sglang.launch_server --model-path /m --port 8000",
            "http://127.0.0.1:8000/health",
        ),
        (
            "/opt/venv/bin/python -m sglang.launch_server --host=0.0.0.0 --port=8001",
            "http://127.0.0.1:8001/health",
        ),
        (
            "/opt/venv/bin/python -m sglang.launch_server --host 10.0.0.5 --port 8002",
            "http://10.0.0.5:8002/health",
        ),
        ("/opt/venv/bin/python -m sglang.launch_server --host :: --port 8003", "http://[::1]:8003/health"),
        ("/opt/venv/bin/python -m sglang.launch_server --host 10.0.0.5", "http://10.0.0.5:30000/health"),
        ("/opt/venv/bin/python -m sglang.launch_server --model-path /m", "http://127.0.0.1:30000/health"),
        ("/opt/venv/bin/python -m sglang.launch_server --port $PORT", "http://127.0.0.1:30000/health"),
    ],
)
def test_a_hand_made_unit_is_asked_on_its_own_port(unit_argv, argv, url):
    unit_argv(argv)
    host = testinfra.get_host("local://")
    assert services.unit_health_url(host, "sglang.service") == url
