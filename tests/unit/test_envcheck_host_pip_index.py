"""A lab server's own pip index (PIP_INDEX_URL, index-url in a pip.conf: its local PyPI mirror) is kept: the
install plan no longer hands kt_python_env the profile's index_url (PyPI), which the role passed as
--index-url and which overrode the host's mirror. It names where the host's index comes from, never the
URL (it may carry a password). kt_python_env_pip_index_url, given, still wins (the role: test_kt_python_env_
network.py)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ktinfra import envcheck
from ktinfra.cli import app

SECRET_MIRROR = "http://lab:s3cret@10.0.0.5:8080/simple"
PROFILE = {
    "name": "site",
    "generation": "current",
    "python": ["3.11"],
    "pip": {"index_url": "https://pypi.org/simple", "extra_index_urls": ["https://download.pytorch.org/whl"]},
    "envs": {"inference": {"name": "inf", "packages": ["six==1.16.0"]}},
}


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A host whose pip configuration is only what the test writes: no env var, an empty home and XDG dirs."""
    for name in ("PIP_INDEX_URL", "PIP_CONFIG_FILE", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "xdg"))
    return tmp_path


def _conf(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _pip(tmp_path) -> dict:
    plan = envcheck.check_install(
        PROFILE, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="venv"
    )
    return plan["pip"]


def test_the_profile_index_is_used_where_the_host_names_none(host, monkeypatch):
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # not even this machine's /etc/pip.conf
    pip = _pip(host)
    assert pip["index_url"] == "https://pypi.org/simple" and pip["index_from"] == "profile"


def test_pip_index_url_in_the_environment_is_kept(host, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", SECRET_MIRROR)
    pip = _pip(host)
    assert pip["index_url"] is None and pip["index_from"] == "host pip configuration (PIP_INDEX_URL)"
    assert pip["extra_index_urls"] == ["https://download.pytorch.org/whl"]  # still added


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("xdg/pip/pip.conf", f"[global]\nindex-url = {SECRET_MIRROR}\n"),
        ("home/.config/pip/pip.conf", f"[wheel]\nindex_url = {SECRET_MIRROR}\n"),
        ("home/.pip/pip.conf", f"[install]\n--index-url={SECRET_MIRROR}\n"),
        ("named.conf", f"[global]\nindex-url = {SECRET_MIRROR}\n"),
    ],
    ids=["site-wide", "user-wheel-section", "legacy-user-install-section", "PIP_CONFIG_FILE"],
)
def test_an_index_in_a_pip_conf_is_kept(host, monkeypatch, where, text):
    conf = _conf(host / where, text)
    if where == "named.conf":
        monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    pip = _pip(host)
    assert pip["index_url"] is None and pip["index_from"] == f"host pip configuration ({conf})"


@pytest.mark.parametrize(
    "text",
    ["[global]\ntimeout = 60\nextra-index-url = http://x/simple\n", "[global]\nindex-url =\n", "[global\n"],
    ids=["other-keys", "empty", "broken"],
)
def test_a_pip_conf_without_an_index_keeps_the_profile_index(host, monkeypatch, text):
    monkeypatch.setenv("PIP_CONFIG_FILE", str(_conf(host / "named.conf", text)))
    monkeypatch.setattr(envcheck, "_pip_config_files", lambda: [host / "named.conf"])  # not /etc/pip.conf
    assert _pip(host)["index_url"] == "https://pypi.org/simple"


def test_the_plan_never_shows_the_host_index_url(host, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", SECRET_MIRROR)
    _conf(host / "xdg/pip/pip.conf", f"[global]\nindex-url = {SECRET_MIRROR}\n")
    (host / "wh").mkdir()
    result = CliRunner().invoke(
        app,
        ["profile", "check", "kt-0.7", "--json", "--root", str(host / "envs"),
         "--wheelhouse", str(host / "wh"), "--manager", "venv", "--env", "inference"],
    )  # fmt: skip
    assert result.exit_code in (0, 2), result.output
    assert "s3cret" not in result.output
    assert json.loads(result.stdout)["pip"]["index_url"] is None
