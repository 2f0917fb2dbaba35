"""The health check of a hand-made sglang unit (no KT_HEALTH_URL in an env file) read the unit's command line
from `systemctl show -p ExecStart --value` up to the first ';': systemd 252 shows the arguments joined by
spaces, unquoted, so a unit starting `/bin/sh -c 'set -a; . /etc/x.env; exec python -m
sglang.launch_server --port 8000'` was read as `/bin/sh -c set -a` and asked on sglang's default port
30000 ('Connection refused' while it served on 8000). The arguments now end where systemctl's own
' ; ignore_errors=' field begins. Real testinfra local host; `systemctl` on PATH prints what systemd 252
prints for such units."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


@pytest.fixture
def shows(tmp_path, monkeypatch):
    def exec_start(*argvs: str) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        (tmp_path / "shown.txt").write_text(
            "".join(
                f"{{ path=/bin/sh ; argv[]={argv} ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; "
                "pid=0 ; code=(null) ; status=0/0 }\n"
                for argv in argvs
            )
        )
        tool = bin_dir / "systemctl"
        tool.write_text(f'#!/bin/sh\ncase "$3" in ExecStart) cat {tmp_path / "shown.txt"} ;; esac\n')
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")

    return exec_start


@pytest.mark.parametrize(
    ("argv", "url"),
    [
        (
            "/bin/sh -c set -a; . /etc/sglang.env; set +a; exec python -m sglang.launch_server --port 8000",
            "http://127.0.0.1:8000/health",
        ),
        (
            "/opt/venv/bin/python -m sglang.launch_server --api-key a;b --host 10.0.0.5 --port 8001",
            "http://10.0.0.5:8001/health",
        ),
        ("/opt/venv/bin/python -m sglang.launch_server --model-path /m;x", "http://127.0.0.1:30000/health"),
    ],
)
def test_a_semicolon_inside_an_argument_does_not_end_the_command(shows, argv, url):
    shows(argv)
    assert services.unit_health_url(testinfra.get_host("local://"), "sglang.service") == url
