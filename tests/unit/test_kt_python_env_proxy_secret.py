"""kt_python_env's pip downloads with a proxy password and an index URL with a token, run for real on
localhost at -vvv (validate, then the env's install into a venv under tmp_path) against a real index and a
real forwarding proxy (local_pypi.py): pip reads both from a 0600 file of the run, removed after it, failed
or not, so neither is in a task's environment (printed in -vvv's connection lines) or argv (in the result)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from local_pypi import PACKAGE, make_wheel, serve_index, serve_proxy
from test_kt_python_env_network import _install, _installed

PASSWORD, TOKEN = "s3cret", "t0ken"


@pytest.fixture
def proxy():
    server = serve_proxy()
    yield server
    server.close()


def _run(tmp: Path, index, proxy) -> tuple[int, str]:
    extra = {
        "kt_python_env_pip_index_url": f"http://ci:{TOKEN}@127.0.0.1:{index.port}/simple",
        "kt_python_env_http_proxy": f"http://lab:{PASSWORD}@127.0.0.1:{proxy.port}",
    }
    return _install(tmp, extra, flags=["-vvv"])


def _settings_files(tmp: Path, output: str) -> tuple[list[str], list[Path]]:
    """The settings files the run's output names (tempfile's result), and those still on disk."""
    named = sorted(set(re.findall(r"[^\s\"']*/ktinfra-pip\.[^\s\"'/]+\.sh", output)))
    return named, sorted((tmp / "scratch").glob("ktinfra-pip.*"))


def test_the_proxy_password_and_index_token_stay_out_of_vvv_and_the_file_is_removed(tmp_path, proxy):
    """Before: the proxy was the pip task's environment, which -vvv prints in its EXEC line (no_log hides
    the result only), and the index URL was in pip's argv."""
    make_wheel(tmp_path / "files")
    index = serve_index(tmp_path / "files")
    try:
        rc, output = _run(tmp_path, index, proxy)
    finally:
        index.close()
    assert rc == 0 and _installed(tmp_path), output[-3000:]
    through = [auth for url, auth in proxy.asked if f"/simple/{PACKAGE}/" in url]
    assert through and through[0] == "Basic " + base64.b64encode(f"lab:{PASSWORD}".encode()).decode()
    assert PASSWORD not in output and TOKEN not in output
    named, left = _settings_files(tmp_path, output)
    assert named and left == [], (named, left)


def test_a_failed_download_shows_pips_error_and_removes_the_file(tmp_path, proxy):
    """The index has no such package: pip wheel fails. Before: the task was no_log (pip's error hidden) and
    -vvv printed the password."""
    (tmp_path / "empty").mkdir()
    index = serve_index(tmp_path / "empty")
    try:
        rc, output = _run(tmp_path, index, proxy)
    finally:
        index.close()
    assert rc != 0 and not _installed(tmp_path), output[-3000:]
    assert f"No matching distribution found for {PACKAGE}" in output, output[-3000:]
    assert any(f"/simple/{PACKAGE}/" in url for url, _ in proxy.asked), proxy.asked
    assert PASSWORD not in output and TOKEN not in output
    named, left = _settings_files(tmp_path, output)
    assert named and left == [], (named, left)
