"""The health check's unit_health_url on a real testinfra local host, against real files: an optional
EnvironmentFile that is absent and one that cannot be read. `systemctl` on PATH is a script printing what
`systemctl show -p EnvironmentFiles --value UNIT` prints (one "PATH (ignore_errors=yes|no)" line each)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


@pytest.fixture
def systemctl(tmp_path, monkeypatch):
    def shows(*lines: str) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        tool = bin_dir / "systemctl"
        tool.write_text("#!/bin/sh\nprintf '%s\\n' " + " ".join(f"'{line}'" for line in lines) + "\n")
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")

    return shows


def test_an_absent_optional_env_file_is_passed_over(tmp_path, systemctl):
    """EnvironmentFile=-/etc/default/sglang absent: systemd starts the unit; the check ended in testinfra's
    RuntimeError ('cat: ...: No such file or directory') instead of reading the next file."""
    env = tmp_path / "serve.env"
    env.write_text("KT_HEALTH_URL=http://127.0.0.1:31000/health\n")
    systemctl(f"{tmp_path}/absent.env (ignore_errors=yes)", f"{env} (ignore_errors=no)")
    host = testinfra.get_host("local://")
    assert services.unit_health_url(host, "sglang.service") == "http://127.0.0.1:31000/health"


def test_an_absent_optional_env_file_alone_gives_the_default(tmp_path, systemctl):
    systemctl(f"{tmp_path}/absent.env (ignore_errors=yes)")
    host = testinfra.get_host("local://")
    assert services.unit_health_url(host, "sglang.service") == services.DEFAULT_HEALTH_URL


def test_an_env_file_that_cannot_be_read_fails_with_the_reason(tmp_path, systemctl):
    """A file cat cannot read (here a directory; for doctor as a non-root user, the 0600 env file render
    writes) was a RuntimeError traceback of testinfra's CommandResult."""
    (tmp_path / "x.env").mkdir()
    systemctl(f"{tmp_path}/x.env (ignore_errors=no)")
    host = testinfra.get_host("local://")
    with pytest.raises(pytest.fail.Exception) as failed:
        services.unit_health_url(host, "ktinfra-serve@x.service")
    assert str(failed.value) == (
        f"ktinfra-serve@x.service: cannot read its environment file {tmp_path}/x.env for KT_HEALTH_URL "
        f"(cat: {tmp_path}/x.env: Is a directory): run doctor as root, or name the URL (ktinfra doctor "
        "--health-url, pytest --kt-health-url)"
    )


def test_supervised_env_files_give_their_health_urls(tmp_path, monkeypatch):
    """Without systemd the URLs come from kt_serve's env files (no unit to ask)."""
    (tmp_path / "a.env").write_text("KT_HEALTH_URL='http://127.0.0.1:30000/health'\n")
    (tmp_path / "b.env").write_text('X=1\nKT_HEALTH_URL="http://127.0.0.1:30001/health"\n')
    (tmp_path / "tiny--run.lora.json").write_text("{}")
    monkeypatch.setattr(services, "SERVE_ENV_DIR", str(tmp_path))
    host = testinfra.get_host("local://")
    assert services.env_file_health_urls(host) == [
        "http://127.0.0.1:30000/health",
        "http://127.0.0.1:30001/health",
    ]
    monkeypatch.setattr(services, "SERVE_ENV_DIR", str(tmp_path / "absent"))
    assert services.env_file_health_urls(host) == []


def test_a_supervised_env_file_that_cannot_be_read_fails_with_the_reason(tmp_path, monkeypatch):
    """Before, `grep ... 2>/dev/null` passed over a file it could not read (doctor not root, the 0600 env
    file render writes; here a directory): no URL, and the health check was skipped, not failed."""
    (tmp_path / "a.env").write_text("KT_HEALTH_URL=http://127.0.0.1:30000/health\n")
    (tmp_path / "x.env").mkdir()
    monkeypatch.setattr(services, "SERVE_ENV_DIR", str(tmp_path))
    host = testinfra.get_host("local://")
    with pytest.raises(pytest.fail.Exception) as failed:
        services.env_file_health_urls(host)
    assert str(failed.value) == (
        f"cannot read the serve environment file {tmp_path}/x.env for KT_HEALTH_URL (cat: {tmp_path}/x.env: "
        "Is a directory): run doctor as root, or name the URL (ktinfra doctor --health-url, pytest "
        "--kt-health-url)"
    )
