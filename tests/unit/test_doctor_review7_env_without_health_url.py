"""The health check where PID 1 is not systemd read KT_HEALTH_URL from each serve env file and dropped,
without a word, a file that had none (edited or written by hand): where no file had it, the check was
skipped as 'no serve unit installed and no --health-url given' while the programs ran. Such an instance is
asked where its server listens, as render derives KT_HEALTH_URL: KT_SERVE_ARGS's --host and --port (the
program passes them to sglang), sglang's own default for either not given. A file with neither fails the
check and names the file. Real testinfra local host, real HTTP server."""

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
live_port, _Config = stopped_instance.live_port, stopped_instance._Config


@pytest.fixture
def supervised(tmp_path, monkeypatch):
    """kt_serve's layout, each instance's env file with the text given."""
    env_dir, sup_dir = tmp_path / "serve", tmp_path / "supervisor"
    (sup_dir / "conf.d").mkdir(parents=True)
    env_dir.mkdir()
    (sup_dir / "supervisord.conf").write_text("[supervisord]\n")
    monkeypatch.setattr(services, "SERVE_ENV_DIR", str(env_dir))
    monkeypatch.setattr(services, "SUPERVISOR_DIR", str(sup_dir))

    def add(name: str, env_text: str) -> Path:
        (env_dir / f"{name}.env").write_text(env_text)
        (sup_dir / "conf.d" / f"{name}.conf").write_text(
            f"[program:ktinfra-serve-{name}]\n"
            f"command=/bin/sh -c 'set -a; . {env_dir}/{name}.env; set +a; exec true'\nautostart=true\n"
        )
        return env_dir / f"{name}.env"

    return add


def _check(capsys) -> str:
    """The health check's output; a skip fails the test (it is what went wrong)."""
    host = testinfra.get_host("local://")
    try:
        services.test_health_endpoint_answers(
            host, _Config(), [], "docker-init", sys.executable, services.SUPERVISOR_DIR
        )
    except pytest.skip.Exception as exc:
        pytest.fail(f"the check was skipped: {exc}")
    return capsys.readouterr().out


def test_an_instance_without_kt_health_url_is_asked_where_its_args_serve(supervised, live_port, capsys):
    # before: skipped, 'no serve unit installed and no --health-url given'
    supervised("q", f'KT_SERVE_ARGS="--model-path /m --host 0.0.0.0 --port {live_port} --tp-size 1"\n')
    assert f"health 200 from http://127.0.0.1:{live_port}/health" in _check(capsys)


def test_one_without_the_url_beside_one_with_it_is_asked_too(supervised, live_port, capsys):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = closed.getsockname()[1]
    closed.close()
    supervised("a", f"KT_HEALTH_URL=http://127.0.0.1:{live_port}/health\n")
    supervised("b", f"KT_SERVE_ARGS='--port={dead} --model-path /m'\n")
    # before: b dropped, and the check passed on a's answer alone
    with pytest.raises(AssertionError, match=f"http://127.0.0.1:{dead}/health: .*refused"):
        _check(capsys)


@pytest.mark.parametrize(
    ("args", "url"),
    [
        ("--model-path /m", services.DEFAULT_HEALTH_URL),  # sglang's defaults, 127.0.0.1:30000
        ("--host :: --port 8001", "http://[::1]:8001/health"),
        ("--host 10.0.0.5", "http://10.0.0.5:30000/health"),
        ("--port 8001\nKT_SERVE_ARGS='--port 8002'", "http://127.0.0.1:8002/health"),  # the last one, as sh
    ],
)
def test_the_url_from_kt_serve_args(supervised, args, url):
    supervised("q", f'KT_SERVE_ARGS="{args}"\n')
    assert services.env_file_health_urls(testinfra.get_host("local://")) == [url]


def test_a_file_with_neither_fails_and_names_it(supervised):
    path = supervised("q", "# edited by hand\nCUDA_VISIBLE_DEVICES=0\n")
    with pytest.raises(pytest.fail.Exception) as failed:
        services.env_file_health_urls(testinfra.get_host("local://"))
    assert str(failed.value) == (
        f"{path} sets neither KT_HEALTH_URL nor KT_SERVE_ARGS: where its instance serves is not known; set "
        "KT_HEALTH_URL there (ktinfra render writes it), or name the URL (ktinfra doctor --health-url, "
        "pytest --kt-health-url)"
    )
