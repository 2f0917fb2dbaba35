"""The host suite's health check where PID 1 is not systemd (AutoDL containers: kt_serve's supervisord
fallback): an instance kt_serve set to stopped keeps its env file and its program (autostart=false), and its
server is not meant to answer. The check asked every env file's KT_HEALTH_URL and failed with 'Connection
refused' for it, while every instance meant to run was up. Real testinfra local host, real HTTP server."""

from __future__ import annotations

import http.server
import importlib
import socket
import sys
import threading
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def live_port():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _program(name: str, state: str, env_dir: Path) -> str:
    return (
        f"[program:ktinfra-serve-{name}]\n"
        f"command=/bin/sh -c 'set -a; . {env_dir}/{name}.env; set +a; exec true'\n"
        f"autostart={'true' if state == 'started' else 'false'}\nautorestart=true\n"
    )


@pytest.fixture
def supervised(tmp_path, monkeypatch, live_port):
    """kt_serve's layout: /etc/ktinfra/serve/NAME.env + /etc/ktinfra/supervisor/conf.d/NAME.conf."""
    env_dir, sup_dir = tmp_path / "serve", tmp_path / "supervisor"
    (sup_dir / "conf.d").mkdir(parents=True)
    env_dir.mkdir()
    (sup_dir / "supervisord.conf").write_text("[supervisord]\n")
    monkeypatch.setattr(services, "SERVE_ENV_DIR", str(env_dir))
    monkeypatch.setattr(services, "SUPERVISOR_DIR", str(sup_dir))

    def add(name: str, state: str, port: int) -> None:
        (env_dir / f"{name}.env").write_text(f'KT_HEALTH_URL="http://127.0.0.1:{port}/health"\n')
        (sup_dir / "conf.d" / f"{name}.conf").write_text(_program(name, state, env_dir))

    return add


class _Config:
    def getoption(self, name):
        return {"kt_health_url": None}[name]


def test_an_instance_set_to_stopped_is_not_asked(supervised, live_port, capsys):
    supervised("qwen3", "started", live_port)
    supervised("spare", "stopped", _closed_port())
    host = testinfra.get_host("local://")
    services.test_health_endpoint_answers(
        host, _Config(), [], "docker-init", sys.executable, services.SUPERVISOR_DIR
    )
    out = capsys.readouterr().out
    assert f"health 200 from http://127.0.0.1:{live_port}/health" in out
    assert "not asked (kt_serve state stopped, supervisord autostart=false): spare" in out


def test_a_started_instance_that_does_not_answer_still_fails(supervised, live_port):
    supervised("qwen3", "started", live_port)
    dead = _closed_port()
    supervised("down", "started", dead)
    host = testinfra.get_host("local://")
    with pytest.raises(AssertionError, match=f"http://127.0.0.1:{dead}/health: .*refused"):
        services.test_health_endpoint_answers(
            host, _Config(), [], "docker-init", sys.executable, services.SUPERVISOR_DIR
        )


def test_only_stopped_instances_skip_and_say_so(supervised):
    supervised("spare", "stopped", _closed_port())
    host = testinfra.get_host("local://")
    with pytest.raises(pytest.skip.Exception, match="instances set to stopped: spare"):
        services.test_health_endpoint_answers(
            host, _Config(), [], "docker-init", sys.executable, services.SUPERVISOR_DIR
        )
