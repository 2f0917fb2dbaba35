"""kt_preflight's install of ktinfra's dependencies into its tool venv (under tmp_path), run for real on
localhost against a real index and a real forwarding proxy (local_pypi.py, the wheels of
test_kt_preflight_network): a proxy password stays out of -vvv, pip reading it from a 0600 file of the run
that is removed after it; and the index is kt_python_env's decision (kt_common's ktinfra_pip_index_url):
the stack profile's index_url unless the host's pip configuration names one."""

from __future__ import annotations

import base64
import os
import re
import stat
import sys
from pathlib import Path

import pytest
import yaml
from local_pypi import serve_index, serve_proxy
from role_play import run_play
from test_kt_preflight_network import NO_HOST_CONFIG, TOOL, _asked, _installed, _tool_vars, wheels  # noqa: F401

PASSWORD = "s3cret"


@pytest.fixture
def proxy():
    server = serve_proxy()
    yield server
    server.close()


def _scratch(tmp: Path) -> dict:
    (tmp / "scratch").mkdir(exist_ok=True)
    return {"TMPDIR": str(tmp / "scratch")}


def test_the_proxy_password_stays_out_of_vvv_and_the_file_is_removed(tmp_path, wheels, proxy):  # noqa: F811
    """Before: the proxy was the install task's environment, which -vvv prints in its EXEC line (no_log
    hides the result only)."""
    # what a run killed before its always (SIGKILL) left: the file of this user on this host, a password in it
    stale = tmp_path / "tool" / f".ktinfra-run.{os.getuid()}" / f"downloads.{os.uname().nodename}.sh"
    stale.parent.mkdir(parents=True)
    stale.write_text(f"export http_proxy=http://lab:{PASSWORD}@old-proxy:3128\n")
    index = serve_index(wheels)
    try:
        extra = _tool_vars(tmp_path) | {
            "kt_preflight_pip_index_url": f"http://127.0.0.1:{index.port}/simple",
            "kt_preflight_http_proxy": f"http://lab:{PASSWORD}@127.0.0.1:{proxy.port}",
        }
        rc, output = run_play(tmp_path, TOOL, extra, env=NO_HOST_CONFIG | _scratch(tmp_path), flags=["-vvv"])
    finally:
        index.close()
    assert rc == 0 and _installed(tmp_path), output[-3000:]
    through = _asked(proxy)
    assert through and through[0][1] == "Basic " + base64.b64encode(f"lab:{PASSWORD}".encode()).decode()
    assert PASSWORD not in output
    named = set(re.findall(r"[^\s\"']*/\.ktinfra-run\.[0-9]+/downloads\.[^\s\"'/]+\.sh", output))
    assert named == {str(stale)} and not stale.exists(), named  # the one name; the killed run's file gone
    assert list((tmp_path / "scratch").glob("ktinfra-pip.*")) == []
    assert stat.S_IMODE(stale.parent.stat().st_mode) == 0o700


def _site_profile(tmp: Path, index_url: str) -> dict:
    profile = {
        "name": "site", "generation": "current", "glibc_min": "2.17", "kernel_min": "3.10",
        "python": f"{sys.version_info.major}.{sys.version_info.minor}", "pip": {"index_url": index_url},
        "envs": {"inference": {"name": "probe", "packages": ["ktprobe==1.0.0"]}},
    }  # fmt: skip
    (tmp / "site.yaml").write_text(yaml.safe_dump(profile))
    return {"kt_preflight_stack": str(tmp / "site.yaml"), "kt_python_env_profile": str(tmp / "site.yaml")}


# slow: a preflight that ignores the profile's index fails
# test_an_index_a_later_pip_conf_empties_is_none_and_the_profiles_is_used; the host's wins:
# test_a_host_pip_conf_naming_pypi_itself_wins_over_the_profiles_index
@pytest.mark.slow
def test_the_profiles_index_is_used_and_the_hosts_pip_index_wins_over_it(tmp_path, wheels):  # noqa: F811
    """Before: preflight did not read the profile's index_url: with no index variable and no host
    configuration its pip asked PyPI, not the lab's mirror that the profile names (kt_python_env asked it)."""
    index, other = serve_index(wheels), serve_index(wheels)
    try:
        extra = _tool_vars(tmp_path) | _site_profile(tmp_path, f"http://127.0.0.1:{index.port}/simple")
        rc, output = run_play(tmp_path, TOOL, extra, env=NO_HOST_CONFIG)
        assert rc == 0 and _installed(tmp_path), output[-3000:]
        assert _asked(index), index.asked
        fresh = tmp_path / "again"
        fresh.mkdir()
        host = NO_HOST_CONFIG | {"PIP_INDEX_URL": f"http://127.0.0.1:{other.port}/simple"}
        extra = _tool_vars(fresh) | _site_profile(fresh, f"http://127.0.0.1:{index.port}/simple")
        rc, output = run_play(fresh, TOOL, extra, env=host)
        assert rc == 0 and _installed(fresh), output[-3000:]
        assert _asked(other) and len(_asked(index)) == 1, (index.asked, other.asked)
    finally:
        index.close()
        other.close()


# slow: a legacy cleanup; the same kt_common leftovers.yml find (this user's files of the shape, in the
# folder, nothing else) as test_kt_python_env_leftovers.py::test_git_scripts_a_killed_run_left_are_removed;
# today's settings file a killed run left: test_the_proxy_password_stays_out_of_vvv_and_the_file_is_removed
@pytest.mark.slow
def test_settings_files_runs_before_bace729_left_in_the_temp_directory_are_removed(tmp_path, wheels):  # noqa: F811
    """Runs before bace729 wrote the settings file (a proxy password in it) as TMPDIR/ktinfra-pip.XXXXXXXX.sh,
    and one killed before its always left it for good. Every run removes those of its user there (the install
    due or not); files of another shape or user stay."""
    scratch = _scratch(tmp_path)
    temp = Path(scratch["TMPDIR"])
    kept = [
        "ktinfra-pip.ab12cd34.sh.bak",
        "ktinfra-pip.ab.sh",
        "other-pip.ab12cd34.sh",
        "ktinfra-pip.qwer5678.sh",
    ]
    for name in ["ktinfra-pip.njishkyo.sh", "ktinfra-pip.a_b1c2d3.sh", *kept]:
        (temp / name).write_text(f"export http_proxy=http://lab:{PASSWORD}@old-proxy:3128\n")
    os.chown(temp / "ktinfra-pip.qwer5678.sh", 65534, 65534)  # another user's
    index = serve_index(wheels)
    try:
        extra = _tool_vars(tmp_path) | {"kt_preflight_pip_index_url": f"http://127.0.0.1:{index.port}/simple"}
        rc, output = run_play(tmp_path, TOOL, extra, env=NO_HOST_CONFIG | scratch)
        assert rc == 0 and _installed(tmp_path), output[-3000:]
        assert sorted(p.name for p in temp.iterdir()) == sorted(kept), output[-3000:]
        (temp / "ktinfra-pip.zz99yy88.sh").write_text("export http_proxy=http://lab:s3cret@old-proxy:3128\n")
        rc, output = run_play(tmp_path, TOOL, extra, env=NO_HOST_CONFIG | scratch)  # nothing to install now
    finally:
        index.close()
    assert rc == 0, output[-3000:]
    assert sorted(p.name for p in temp.iterdir()) == sorted(kept), output[-3000:]


def test_an_index_a_later_pip_conf_empties_is_none_and_the_profiles_is_used(tmp_path, wheels):  # noqa: F811
    """pip merges its files (a later one wins) and takes an empty index-url as none: a site-wide mirror that
    PIP_CONFIG_FILE empties leaves pip install on its default index, so the profile's index is passed (as
    envcheck.host_pip_index decides for kt_python_env). Before: `pip config list` shows each file's value,
    the site-wide one counted, no --index-url went to pip and the profile's index was not asked."""
    xdg = tmp_path / "xdg" / "pip" / "pip.conf"
    xdg.parent.mkdir(parents=True)
    xdg.write_text("[global]\nindex-url = http://127.0.0.1:9/simple\n")  # nothing answers there
    named = tmp_path / "named.conf"
    named.write_text("[global]\nindex-url =\n")
    index = serve_index(wheels)
    try:
        extra = _tool_vars(tmp_path) | _site_profile(tmp_path, f"http://127.0.0.1:{index.port}/simple")
        host = {"PIP_CONFIG_FILE": str(named), "XDG_CONFIG_DIRS": str(tmp_path / "xdg")}
        rc, output = run_play(tmp_path, TOOL, extra, env=host | _scratch(tmp_path))
        assert rc == 0 and _installed(tmp_path), output[-3000:]
        assert _asked(index), index.asked
    finally:
        index.close()


def test_a_host_pip_conf_naming_pypi_itself_wins_over_the_profiles_index(tmp_path, wheels):  # noqa: F811
    """An index-url of https://pypi.org/simple in the host's pip configuration is the host admin's choice
    like any other (envcheck.host_pip_index counts it for kt_python_env): no --index-url goes to pip, the
    profile's index is not asked. PyPI is unreachable here (a dead https proxy), the wheelhouse holds every
    dependency. Before: the tool venv's pip was asked whether its index differs from PyPI's, so the host's
    PyPI counted as none and the profile's index was asked."""
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://pypi.org/simple\nretries = 0\n")
    index = serve_index(wheels)
    try:
        extra = _tool_vars(tmp_path) | _site_profile(tmp_path, f"http://127.0.0.1:{index.port}/simple")
        extra |= {"kt_preflight_wheelhouse": str(wheels), "kt_preflight_https_proxy": "http://127.0.0.1:9"}
        rc, output = run_play(tmp_path, TOOL, extra, env={"PIP_CONFIG_FILE": str(conf)} | _scratch(tmp_path))
        assert rc == 0 and _installed(tmp_path), output[-3000:]
        assert index.asked == [], index.asked
    finally:
        index.close()
