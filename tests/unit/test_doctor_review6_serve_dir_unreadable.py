"""The health check where PID 1 is not systemd lists kt_serve_config_dir (/etc/ktinfra/serve) for the
instances' env files. A directory doctor may not read (0700 root's, doctor run as a normal user) was read as
'no env files': the check was skipped ('no serve unit installed and no --health-url given') and doctor passed
with every server down. It now fails, saying the directory cannot be read and to run doctor as root. Real
testinfra local host, seen as a user who is not root (not_root_host)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra
from not_root_host import NotRootHost

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")
stopped_instance = importlib.import_module("test_doctor_review3_stopped_instance")


def _check(host, sup_dir: Path) -> None:
    services.test_health_endpoint_answers(
        host, stopped_instance._Config(), [], "docker-init", sys.executable, str(sup_dir)
    )


def _failure(host, sup_dir: Path) -> str:
    """The check's failure message; its skip fails this test instead of skipping it."""
    try:
        _check(host, sup_dir)
    except pytest.skip.Exception as skipped:
        pytest.fail(f"the check was skipped: {skipped}")
    except pytest.fail.Exception as failed:
        return str(failed)
    pytest.fail("the check passed")


def test_a_serve_dir_doctor_cannot_read_fails_rather_than_skips(tmp_path, monkeypatch):
    serve = tmp_path / "serve"
    serve.mkdir()
    (serve / "qwen3.env").write_text("KT_HEALTH_URL=http://127.0.0.1:30123/health\n")
    serve.chmod(0o000)
    monkeypatch.setattr(services, "SERVE_ENV_DIR", str(serve))
    try:
        said = _failure(NotRootHost(), tmp_path / "supervisor")
    finally:
        serve.chmod(0o755)
    assert said.startswith(f"cannot list the serve environment files in {serve} ("), said
    assert "Permission denied" in said and "run doctor as root (sudo ktinfra doctor" in said, said
    # sudo on the controller does not reach a host doctor asks over ssh
    assert "over ssh: ssh://root@HOST, or HOST?sudo=true" in said, said


def test_a_serve_dir_that_is_not_there_still_skips(tmp_path, monkeypatch):
    monkeypatch.setattr(services, "SERVE_ENV_DIR", str(tmp_path / "no-such-dir"))
    with pytest.raises(pytest.skip.Exception) as skipped:
        _check(testinfra.get_host("local://"), tmp_path / "supervisor")
    assert "no serve unit installed and no --health-url given" in str(skipped.value)
