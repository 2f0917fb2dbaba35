"""kt_common's ktinfra_pip filters, called directly: the one rule for pip index URLs, pip trusted hosts and
an absolute directory that kt_preflight and kt_python_env both apply (before, each role wrote the regexes)."""

from __future__ import annotations

import importlib.util

import pytest
from role_play import ROLES

_SPEC = importlib.util.spec_from_file_location(
    "ktinfra_pip_plugin", ROLES / "kt_common/filter_plugins/ktinfra_pip.py"
)
plugin = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(plugin)


def test_index_urls_pip_cannot_use():
    given = [
        "https://mirror.example/simple",
        "http://10.0.0.5:8080/simple",
        "file:///srv/wheels/simple",
        "pypi.mirror.example/simple",
        "ftp://mirror/simple",
        "https:///simple",
        "",
    ]
    assert plugin.ktinfra_pip_not_indexes(given) == given[3:]


def test_trusted_hosts_pip_cannot_use():
    given = ["mirror.lab", "10.0.0.5:8080", "[::1]:8080", "http://mirror.lab", "mirror.lab/simple", "a b", ""]
    assert plugin.ktinfra_pip_not_hosts(given) == given[3:]


def test_a_host_with_a_trailing_newline_is_not_a_host():
    assert plugin.ktinfra_pip_not_hosts(["mirror.lab\n"]) == ["mirror.lab\n"]


def test_items_are_compared_as_strings():
    assert plugin.ktinfra_pip_not_hosts([8080]) == []
    assert plugin.ktinfra_pip_not_indexes([8080]) == ["8080"]


@pytest.mark.parametrize("path", ["/opt/ktinfra/tool", "/opt//ktinfra/", "/a", "/opt/.hidden", "/opt/x..y"])
def test_absolute_dirs(path):
    assert plugin.ktinfra_absolute_dir(path)


@pytest.mark.parametrize(
    "path", ["/", "//", "//opt", "", "opt/ktinfra", "/opt/../etc", "/opt/.", "/opt/./x", "/..", None, 5]
)
def test_not_absolute_dirs(path):
    assert not plugin.ktinfra_absolute_dir(path)


def test_the_roles_use_the_filters_and_not_their_own_regexes():
    preflight = (ROLES / "kt_preflight/tasks/main.yml").read_text()
    python_env = (ROLES / "kt_python_env/tasks/validate.yml").read_text()
    for text in (preflight, python_env):
        assert "ktinfra_pip_not_hosts" in text and "ktinfra_pip_not_indexes" in text
        assert "https?://" not in text and "[^/\\\\s]+$" not in text
    assert "ktinfra_absolute_dir" in preflight
