"""kt_preflight's install of ktinfra's dependencies into its tool venv (under tmp_path), run for real on
localhost against a real package index, a real forwarding proxy and a self-signed https mirror on 127.0.0.1
(local_pypi.py, as kt_python_env's network tests): the proxy and CA bundle variables (kt_python_env's by
default) are that download's environment, a proxy password stays out of the output, bad values are refused
before anything runs, and the host's own pip index (pip.conf, PIP_INDEX_URL) is kept unless the role names
one."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from local_pypi import self_signed, serve_index, serve_proxy
from role_play import REPO, run_play
from test_kt_preflight_plans import PREFLIGHT, _extra, _last_error

TOOL = [{"ansible.builtin.include_role": {"name": "kt_preflight", "tasks_from": "tool"}}]
# pip's configuration files of this machine are not read (its own mirrors would answer instead)
NO_HOST_CONFIG = {"PIP_CONFIG_FILE": "/dev/null"}
DEP = "/simple/typer/"  # a dependency of ktinfra, asked of the index by the tool venv's pip only


@pytest.fixture(scope="session")
def wheels(tmp_path_factory) -> Path:
    """ktinfra's dependencies and its build requirement (setuptools, for the controller's wheel build) as
    wheels, named as local_pypi's index finds them (normalized, lower case)."""
    folder = tmp_path_factory.mktemp("deps")
    project = (REPO / "pyproject.toml").read_text()  # tomllib is 3.11's: ktinfra runs on 3.10
    lists = [re.search(rf"^{key} = \[(.*?)\]", project, re.M | re.S) for key in ("dependencies", "requires")]
    wanted = [dep for found in lists for dep in re.findall(r'"([^"]+)"', found.group(1))]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", str(folder),
         *wanted],
        check=True, capture_output=True,
    )  # fmt: skip
    for wheel in folder.glob("*.whl"):
        name, rest = wheel.name.split("-", 1)
        wheel.rename(folder / f"{re.sub(r'[-_.]+', '_', name).lower()}-{rest}")
    return folder


@pytest.fixture
def index(wheels):
    server = serve_index(wheels)
    yield server
    server.close()


@pytest.fixture
def proxy():
    server = serve_proxy()
    yield server
    server.close()


def _tool_vars(tmp_path: Path) -> dict:
    (tmp_path / "wheelhouse").mkdir(exist_ok=True)
    return {
        "kt_preflight_tool_dir": str(tmp_path / "tool"),
        "kt_preflight_build_dir": str(tmp_path / "dist"),
        "kt_preflight_wheelhouse": str(tmp_path / "wheelhouse"),
        "kt_preflight_python": getattr(sys, "_base_executable", sys.executable),
        "kt_preflight_pip_timeout": 10,
    }


def _installed(tmp_path: Path, tool: str = "tool") -> bool:
    return (tmp_path / tool / "bin" / "ktinfra").exists()


def _asked(server, path: str = DEP) -> list[tuple[str, str | None]]:
    return [(url, auth) for url, auth in server.asked if path in url]


# ---- proxy and CA bundle ----


# slow: the same tool install through the proxy, Basic auth and password kept out (at -vvv) as
# test_kt_preflight_proxy_secret.py::test_the_proxy_password_stays_out_of_vvv_and_the_file_is_removed
@pytest.mark.slow
def test_the_proxy_carries_the_tool_install_and_its_password_is_not_shown(tmp_path, index, proxy):
    """Before: there were no such variables; pip asked the index directly, the proxy was never asked (on a
    lab whose only way out is the proxy, the very first role failed)."""
    extra = _extra(tmp_path) | {
        "kt_preflight_pip_index_url": f"http://127.0.0.1:{index.port}/simple",
        "kt_preflight_http_proxy": f"http://lab:s3cret@127.0.0.1:{proxy.port}",
    }
    rc, output = run_play(tmp_path, PREFLIGHT, extra, env=NO_HOST_CONFIG, flags=["-v"])
    assert rc == 0 and _installed(tmp_path, "opt/tool"), output[-3000:]
    through = _asked(proxy)
    assert through and through[0][1] == "Basic " + base64.b64encode(b"lab:s3cret").decode(), proxy.asked
    assert "s3cret" not in output


# slow: kt_python_env's proxy as preflight's, asked:
# test_a_failed_install_through_a_proxy_with_a_password_names_pips_error_not_the_password; its no-proxy as
# preflight's: test_bad_network_settings_are_refused_before_anything[env-no-proxy-url]; NO_PROXY (the same
# ktinfra_proxy_env) honoured: test_kt_python_env_network.py::test_no_proxy_hosts_are_asked_directly
@pytest.mark.slow
def test_kt_python_env_proxy_and_no_proxy_are_the_defaults(tmp_path, index, proxy):
    """The lab's proxy set once, for kt_python_env: preflight's download takes it too, and its no-proxy
    hosts (the local mirror) are asked directly."""
    network = {
        "kt_preflight_pip_index_url": f"http://127.0.0.1:{index.port}/simple",
        "kt_python_env_http_proxy": f"http://127.0.0.1:{proxy.port}",
    }
    rc, output = run_play(tmp_path, TOOL, _tool_vars(tmp_path) | network, env=NO_HOST_CONFIG)
    assert rc == 0 and _installed(tmp_path), output[-3000:]
    assert _asked(proxy), proxy.asked
    fresh = tmp_path / "again"
    fresh.mkdir()
    direct = network | {"kt_python_env_no_proxy": "127.0.0.1"}
    rc, output = run_play(fresh, TOOL, _tool_vars(fresh) | direct, env=NO_HOST_CONFIG)
    assert rc == 0 and _installed(fresh), output[-3000:]
    assert len(_asked(proxy)) == 1 and len(_asked(index)) == 2, (proxy.asked, index.asked)


# slow: the same bundle under every name (kt_common's ktinfra_proxy_env) past a host's REQUESTS_CA_BUNDLE,
# a cheaper run: test_kt_python_env_network.py::test_a_ca_bundle_lets_pip_trust_the_labs_https_mirror; the
# default from kt_python_env_ca_bundle:
# test_bad_network_settings_are_refused_before_anything[env-missing-bundle]
@pytest.mark.slow
def test_a_ca_bundle_lets_pip_trust_the_labs_https_mirror(tmp_path, wheels):
    """This host sets REQUESTS_CA_BUNDLE (Debian's system bundle), which requests lets win over PIP_CERT:
    the bundle goes in under every name. Before: no variable; pip refused the mirror's certificate."""
    cert, key = self_signed(tmp_path / "tls")
    server = serve_index(wheels, tls=(cert, key))
    try:
        system = NO_HOST_CONFIG | {"REQUESTS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt"}
        extra = _tool_vars(tmp_path) | {
            "kt_preflight_pip_index_url": f"https://127.0.0.1:{server.port}/simple",
            "kt_preflight_ca_bundle": str(cert),
        }
        rc, output = run_play(tmp_path, TOOL, extra, env=system)
        assert rc == 0 and _installed(tmp_path), output[-3000:]
        assert _asked(server), server.asked
    finally:
        server.close()


def test_a_failed_install_through_a_proxy_with_a_password_names_pips_error_not_the_password(tmp_path, proxy):
    """The install's own output is hidden (no_log); the rescue still ends with pip's last line, which holds
    no password. Before: no proxy variable; the proxy was never asked."""
    (tmp_path / "empty").mkdir()
    bare = serve_index(tmp_path / "empty")  # answers, but has none of ktinfra's dependencies
    try:
        extra = _extra(tmp_path) | {
            "kt_preflight_pip_index_url": f"http://127.0.0.1:{bare.port}/simple",
            "kt_preflight_pip_timeout": 5,
            "kt_python_env_http_proxy": f"http://lab:s3cret@127.0.0.1:{proxy.port}",
        }
        rc, output = run_play(tmp_path, PREFLIGHT, extra, env=NO_HOST_CONFIG, flags=["-v"])
    finally:
        bare.close()
    assert rc != 0 and _asked(proxy), output[-3000:]
    last = _last_error(output)
    assert "preflight failed: ERROR: No matching distribution found for typer" in last, last
    assert "s3cret" not in output
    assert not (tmp_path / "opt").exists()  # the rescue removed the tool venv this run made


# ---- the index: role variable > the host's pip configuration > pip's default ----


# slow: the same tool.yml probe and rule (an index in the host's pip.conf: no --index-url from the profile) as
# test_kt_preflight_proxy_secret.py::test_a_host_pip_conf_naming_pypi_itself_wins_over_the_profiles_index
@pytest.mark.slow
def test_the_hosts_pip_conf_mirror_is_used(tmp_path, index):
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = http://127.0.0.1:{index.port}/simple\n")
    rc, output = run_play(tmp_path, TOOL, _tool_vars(tmp_path), env={"PIP_CONFIG_FILE": str(conf)})
    assert rc == 0 and _installed(tmp_path), output[-3000:]
    assert _asked(index), index.asked


# slow: the host's index kept (the same tool.yml probe, no --index-url):
# test_kt_preflight_proxy_secret.py::test_a_host_pip_conf_naming_pypi_itself_wins_over_the_profiles_index;
# kt_python_env_pip_index_url as preflight's, asked:
# test_kt_preflight_tool.py::test_a_plain_http_mirror_named_in_the_trusted_hosts_is_used[string]; the variable
# first: test_kt_common_proxy_filters.py::test_the_index_is_the_variable_else_the_hosts_own_else_the_profiles
@pytest.mark.slow
def test_pip_index_url_of_the_host_is_used_and_the_role_variable_wins_over_it(tmp_path, wheels, index):
    other = serve_index(wheels)
    try:
        host = NO_HOST_CONFIG | {"PIP_INDEX_URL": f"http://127.0.0.1:{other.port}/simple"}
        rc, output = run_play(tmp_path, TOOL, _tool_vars(tmp_path), env=host)
        assert rc == 0 and _installed(tmp_path) and _asked(other), output[-3000:]
        fresh = tmp_path / "again"
        fresh.mkdir()
        # kt_python_env's index, which preflight's defaults to
        mirror = {"kt_python_env_pip_index_url": f"http://127.0.0.1:{index.port}/simple"}
        rc, output = run_play(fresh, TOOL, _tool_vars(fresh) | mirror, env=host)
        assert rc == 0 and _installed(fresh), output[-3000:]
        assert _asked(index) and len(_asked(other)) == 1, (index.asked, other.asked)
    finally:
        other.close()


# ---- bad input: refused before anything runs on the host ----

PROXY_REFUSED = "must be a proxy URL with its scheme"
BUNDLE_REFUSED = "kt_preflight_ca_bundle (default: kt_python_env_ca_bundle) must be the absolute path of a"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        # slow: the params marked slow meet the same assert and filters as env-proxy-with-space,
        # env-no-proxy-url and env-missing-bundle (each input's rule: test_kt_common_proxy_filters.py); a
        # directory (no file, though it exists) stays: bundle-a-directory
        pytest.param({"kt_preflight_https_proxy": "lab:s3cret@proxy.lab:3128"},
                     "kt_preflight_https_proxy (default: ", marks=pytest.mark.slow),
        ({"kt_python_env_http_proxy": "http://lab:s3cret@proxy.lab:3128/x y"}, "kt_preflight_http_proxy ("),
        pytest.param({"kt_preflight_no_proxy": ["mirror.lab", "http://10.0.0.5"]},
                     'not URLs (got ["http://10.0.0.5"])', marks=pytest.mark.slow),
        ({"kt_python_env_no_proxy": "mirror.lab,http://10.0.0.5"}, "kt_preflight_no_proxy (default: kt_pyt"),
        pytest.param({"kt_preflight_ca_bundle": "certs/lab.pem"}, BUNDLE_REFUSED, marks=pytest.mark.slow),
        ({"kt_python_env_ca_bundle": "/nonexistent/lab.pem"}, '(got "/nonexistent/lab.pem")'),
        ({"kt_preflight_ca_bundle": "/"}, '(got "/")'),
    ],
    ids=["proxy-without-scheme", "env-proxy-with-space", "no-proxy-url", "env-no-proxy-url",
         "relative-bundle", "env-missing-bundle", "bundle-a-directory"],
)  # fmt: skip
def test_bad_network_settings_are_refused_before_anything(tmp_path, given, message):
    rc, output = run_play(tmp_path, PREFLIGHT, _extra(tmp_path) | given)
    assert rc != 0, output[-3000:]
    last = json.loads(_last_error(output).split("=> ", 1)[1])["msg"]
    assert message in last, last
    if "proxy" in next(iter(given)):
        assert PROXY_REFUSED in last or "not URLs" in last, last
    else:
        assert BUNDLE_REFUSED in last, last
    assert "s3cret" not in output
    assert "Build the ktinfra wheel" not in output and "changed:" not in output, output[-3000:]
    assert not (tmp_path / "opt").exists() and not (tmp_path / "dist").exists()


def test_good_network_settings_pass_the_check(tmp_path):
    """Stopped at the python check (an unknown python), before any venv or install on the host."""
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    given = {
        "kt_preflight_https_proxy": "http://lab:s3cret@proxy.lab:3128",
        "kt_python_env_http_proxy": "socks5h://10.0.0.1:1080/",
        "kt_preflight_no_proxy": "mirror.lab,.lab.example,10.0.0.0/8",
        "kt_python_env_ca_bundle": str(tmp_path / "ca.pem"),
        "kt_preflight_python": "/nonexistent/py",
    }
    rc, output = run_play(tmp_path, PREFLIGHT, _extra(tmp_path) | given)
    assert "kt_preflight: " not in output, output[-3000:]
    assert "kt_preflight_python /nonexistent/py cannot make ktinfra's tool venv" in output, output[-3000:]
    assert "s3cret" not in output
