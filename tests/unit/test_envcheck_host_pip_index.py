"""A lab server's own pip index (PIP_INDEX_URL, index-url in a pip.conf: its local PyPI mirror) is kept: the
install plan no longer hands kt_python_env the profile's index_url (PyPI), which the role passed as
--index-url and which overrode the host's mirror. It names where the host's index comes from, never the
URL (it may carry a password). kt_python_env_pip_index_url, given, still wins (the role: test_kt_python_env_
network.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
    monkeypatch.setattr(envcheck, "_pip_config_files", lambda _=None: [host / "named.conf"])  # no /etc one
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


# ---- what pip itself reads: a later file wins, an empty value is none, the env's own pip.conf counts ----


def test_an_empty_index_url_in_a_later_file_leaves_pip_none(host, monkeypatch):
    """pip merges its files, a later one winning, and drops an empty value: a PIP_CONFIG_FILE with an empty
    index-url takes the site-wide mirror away (pip asks its default index). Before: the site-wide file was
    named and the profile's index dropped."""
    _conf(host / "xdg/pip/pip.conf", f"[global]\nindex-url = {SECRET_MIRROR}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(_conf(host / "named.conf", "[global]\nindex-url =\n")))
    assert envcheck.host_pip_index() is None
    assert _pip(host)["index_url"] == "https://pypi.org/simple"


def test_a_pip_config_file_that_exists_hides_the_users_pip_conf(host, monkeypatch):
    """pip reads no user file where PIP_CONFIG_FILE names one that exists. Before: the user's mirror
    counted."""
    _conf(host / "home/.config/pip/pip.conf", f"[global]\nindex-url = {SECRET_MIRROR}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(_conf(host / "named.conf", "[global]\ntimeout = 60\n")))
    assert envcheck.host_pip_index() is None


def test_an_envs_own_pip_conf_counts_for_that_env(host, monkeypatch):
    """pip in a venv or conda env also reads <env>/pip.conf (sys.prefix/pip.conf), after the user's and
    before PIP_CONFIG_FILE. Before: not read; the plan had no per-env pip settings and passed the profile's
    index over the env's mirror."""
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(host / "xdg"))
    conf = _conf(host / "envs" / "inf" / "pip.conf", f"[wheel]\nindex-url = {SECRET_MIRROR}\n")
    plan = envcheck.check_install(
        PROFILE, ["inference"], root=host / "envs", wheelhouse=host / "wh", manager="venv"
    )
    env_pip = plan["envs"][0]["pip"]
    assert env_pip["index_url"] is None and env_pip["index_from"] == f"host pip configuration ({conf})"
    assert plan["pip"]["index_url"] == "https://pypi.org/simple"  # the host's, for pip outside the env


SCENARIOS = {
    "none": {},
    "global": {"xdg/pip/pip.conf": "[global]\nindex-url = http://g/simple\n"},
    "wheel-only": {"home/.config/pip/pip.conf": "[wheel]\nindex-url = http://w/simple\n"},
    "install-only": {"home/.pip/pip.conf": "[install]\nindex_url = http://i/simple\n"},
    "download-only": {"home/.pip/pip.conf": "[download]\nindex-url = http://d/simple\n"},
    "emptied-later": {
        "xdg/pip/pip.conf": "[global]\nindex-url = http://g/simple\n",
        "home/.config/pip/pip.conf": "[global]\nindex-url =\n",
    },
    "empty-install-over-global": {
        "xdg/pip/pip.conf": "[global]\nindex-url = http://g/simple\n[install]\nindex-url =\n"
    },
    # PyPI named by the host is its admin's choice like any other index (as kt_preflight takes it, 6b12c85)
    "pypi-itself": {"xdg/pip/pip.conf": "[global]\nindex-url = https://pypi.org/simple\n"},
}


# pip's own answer: the index_url `pip wheel` and `pip install` take from the configuration they read, with
# no default (as kt_preflight's tool.yml asks: an index-url naming PyPI itself counts), '-' for none
PIP_TAKES = """
from pip._internal.commands import create_command
def taken(name):
    command = create_command(name)
    command.parser.set_defaults(index_url=None)
    return command.parse_args([])[0].index_url or "-"
print(taken("wheel"), taken("install"))
"""


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_envcheck_agrees_with_pip(host, name):
    """The same files read by pip itself: envcheck names an index exactly where `pip wheel` or `pip install`
    (the pip commands kt_python_env runs) takes one from its configuration, PyPI's own URL too."""
    for where, text in SCENARIOS[name].items():
        _conf(host / where, text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"HOME": str(host / "home"), "XDG_CONFIG_DIRS": str(host / "xdg")}
    taken = subprocess.run(
        [sys.executable, "-c", PIP_TAKES], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    pip_names_one = any(url != "-" for url in taken)
    assert (envcheck.host_pip_index() is not None) == pip_names_one, taken
