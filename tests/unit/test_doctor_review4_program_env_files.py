"""The health check where PID 1 is not systemd found the instances' KT_HEALTH_URL in /etc/ktinfra/serve only
(kt_serve_config_dir's default): on a host set up with another kt_serve_config_dir it found no URL and was
skipped ('no serve unit installed and no --health-url given') while a server was down. Each program's
command sources its env file (`. DIR/NAME.env`), which the check now reads as well. Real testinfra local
host, real HTTP servers."""

from __future__ import annotations

import importlib
import socket
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")
stopped_instance = importlib.import_module("test_doctor_review3_stopped_instance")
live_port = stopped_instance.live_port


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """kt_serve's supervisord layout with kt_serve_config_dir=tmp/cfg; nothing in the default env dir."""
    cfg, sup_dir = tmp_path / "cfg", tmp_path / "supervisor"
    (sup_dir / "conf.d").mkdir(parents=True)
    cfg.mkdir()
    (sup_dir / "supervisord.conf").write_text("[supervisord]\n")
    monkeypatch.setattr(services, "SERVE_ENV_DIR", str(tmp_path / "no-such-dir"))

    def add(name: str, state: str, port: int) -> None:
        (cfg / f"{name}.env").write_text(f'KT_HEALTH_URL="http://127.0.0.1:{port}/health"\n')
        (sup_dir / "conf.d" / f"ktinfra-serve-{name}.conf").write_text(
            f"[program:ktinfra-serve-{name}]\n"
            f"command=/bin/sh -c 'set -a; . {cfg}/{name}.env; set +a; set -f; exec true'\n"
            f"autostart={'true' if state == 'started' else 'false'}\n"
        )

    return sup_dir, add


def _check(sup_dir: Path) -> None:
    """The check run once; its skip (no URL found) fails this test instead of skipping it."""
    host = testinfra.get_host("local://")
    try:
        services.test_health_endpoint_answers(
            host, stopped_instance._Config(), [], "docker-init", sys.executable, str(sup_dir)
        )
    except pytest.skip.Exception as skipped:
        pytest.fail(f"the check was skipped: {skipped}")


def test_a_server_down_is_found_through_its_program(layout):
    sup_dir, add = layout
    add("qwen3", "started", _closed_port())
    with pytest.raises(AssertionError) as failed:
        _check(sup_dir)
    assert "http://127.0.0.1:" in str(failed.value), str(failed.value)


def test_a_live_server_passes_and_a_stopped_one_is_not_asked(layout, live_port, capsys):
    sup_dir, add = layout
    add("qwen3", "started", live_port)
    add("spare", "stopped", _closed_port())
    _check(sup_dir)
    out = capsys.readouterr().out
    assert f"health 200 from http://127.0.0.1:{live_port}/health" in out, out
    assert "not asked (kt_serve state stopped, supervisord autostart=false): spare" in out, out
