"""kt_python_env's network settings, run for real on localhost (validate, then each env's install into a
venv under tmp_path) against a real package index and a real forwarding proxy on 127.0.0.1 (local_pypi.py):
which index pip asks (the role variable, else the host's own pip configuration, else the profile's), the
proxy and CA bundle variables as the downloads' environment, and a proxy password kept out of the output."""

from __future__ import annotations

import base64
import stat
import sys
from pathlib import Path

import pytest
import yaml
from local_pypi import PACKAGE, VERSION, make_wheel, self_signed, serve_index, serve_proxy
from role_play import REPO, run_play
from test_envtune_review_pip_timeout import run_validate

DEAD_INDEX = "http://127.0.0.1:9/simple"  # the profile's index: nothing answers there
TASKS = [
    {"ansible.builtin.include_role": {"name": "kt_python_env", "tasks_from": "validate"}},
    {
        "ansible.builtin.include_role": {"name": "kt_python_env", "tasks_from": "env"},
        "loop": "{{ kt_python_env_install.envs }}",
        "loop_control": {"loop_var": "kt_python_env_spec"},
    },
]


def _extra(tmp: Path) -> dict:
    """ktinfra (this checkout) in tmp/tool/bin, a site profile of one env pinning the local index's wheel."""
    (tmp / "tool" / "bin").mkdir(parents=True, exist_ok=True)
    (tmp / "scratch").mkdir(exist_ok=True)
    wrapper = tmp / "tool" / "bin" / "ktinfra"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m ktinfra "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    profile = {
        "name": "site", "generation": "current", "python": python,
        "glibc_min": "2.17", "kernel_min": "3.10", "pip": {"index_url": DEAD_INDEX},
        "envs": {"inference": {"name": "probe", "packages": [f"{PACKAGE}=={VERSION}"]}},
    }  # fmt: skip
    (tmp / "site.yaml").write_text(yaml.safe_dump(profile))
    return {
        "kt_preflight_ktinfra_exe": str(wrapper),
        "kt_python_env_profile": str(tmp / "site.yaml"),
        "kt_python_env_envs": ["inference"],
        "kt_python_env_manager": "venv",
        "kt_python_env_installer": "pip",
        "kt_python_env_compile_bytecode": False,
        "kt_python_env_pip_timeout": 10,
        "kt_python_env_root": str(tmp / "envs"),
        "kt_python_env_wheelhouse": str(tmp / "wh"),
    }


def _install(tmp: Path, extra: dict | None = None, env: dict | None = None, flags=None) -> tuple[int, str]:
    """The play with pip's configuration only what `env` says (PIP_CONFIG_FILE: none of this machine's)."""
    run_env = {"TMPDIR": str(tmp / "scratch"), "PIP_CONFIG_FILE": "/dev/null", **(env or {})}
    return run_play(tmp, TASKS, _extra(tmp) | (extra or {}), env=run_env, flags=flags)


def _installed(tmp: Path) -> bool:
    return any((tmp / "envs" / "probe" / "lib").glob(f"python3*/site-packages/{PACKAGE}.py"))


def _asked(server) -> list[str]:
    return [path for path, _ in server.asked if f"/simple/{PACKAGE}/" in path]


@pytest.fixture
def index(tmp_path):
    make_wheel(tmp_path / "files")
    server = serve_index(tmp_path / "files")
    yield server
    server.close()


@pytest.fixture
def proxy():
    server = serve_proxy()
    yield server
    server.close()


# ---- the index: role variable > the host's pip configuration > the profile ----


# slow: the same index_from rule (a pip configuration that names an index: no --index-url, the profile's
# dead one not asked) as test_an_envs_own_pip_conf_mirror_is_used_over_the_profile_index, which also takes the
# env's own settings; which files envcheck reads: test_envcheck_host_pip_index.py
@pytest.mark.slow
def test_the_hosts_pip_conf_mirror_is_used_over_the_profile_index(tmp_path, index):
    """Before: the profile's index went to pip wheel as --index-url and overrode the lab's mirror in its
    pip.conf; here that index is dead, so the install failed."""
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = http://127.0.0.1:{index.port}/simple\n")
    rc, output = _install(tmp_path, env={"PIP_CONFIG_FILE": str(conf)})
    assert rc == 0 and _installed(tmp_path), output[-3000:]
    assert _asked(index), index.asked


def test_an_envs_own_pip_conf_mirror_is_used_over_the_profile_index(tmp_path, index):
    """pip in the env also reads <env>/pip.conf (its site file, sys.prefix/pip.conf): an env a lab gave its
    own mirror keeps it. Before: that file was not looked at, the profile's index (dead here) went to pip
    wheel as --index-url over it and the install failed."""
    conf = tmp_path / "envs" / "probe" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(f"[global]\nindex-url = http://127.0.0.1:{index.port}/simple\n")
    (tmp_path / "empty.conf").write_text("")  # an existing PIP_CONFIG_FILE: no user file is read either
    host = {"PIP_CONFIG_FILE": str(tmp_path / "empty.conf"), "XDG_CONFIG_DIRS": str(tmp_path / "xdg")}
    rc, output = _install(tmp_path, env=host)
    assert rc == 0 and _installed(tmp_path), output[-3000:]
    assert _asked(index), index.asked


# slow: the host's index over the profile's: test_an_envs_own_pip_conf_mirror_is_used_over_the_profile_index
# (same index_from rule); the role variable first: test_kt_common_proxy_filters.py
@pytest.mark.slow
def test_pip_index_url_of_the_host_is_used_and_the_role_variable_wins_over_it(tmp_path, index):
    other = serve_index(tmp_path / "files")
    try:
        host = {"PIP_INDEX_URL": f"http://127.0.0.1:{other.port}/simple"}
        rc, output = _install(tmp_path, env=host)
        assert rc == 0 and _installed(tmp_path) and _asked(other), output[-3000:]
        fresh = tmp_path / "again"
        fresh.mkdir()
        mirror = {"kt_python_env_pip_index_url": f"http://127.0.0.1:{index.port}/simple"}
        rc, output = _install(fresh, mirror, env=host)
        assert rc == 0 and _installed(fresh), output[-3000:]
        assert _asked(index) and len(_asked(other)) == 1  # the host's index was not asked the second time
    finally:
        other.close()


# ---- proxy and CA bundle ----


# slow: the same download through the proxy, Basic auth and password kept out (at -vvv) as
# test_kt_python_env_proxy_secret.py::test_the_proxy_password_and_index_token_stay_out_of_vvv_and_the_file_is_removed  # noqa: E501
@pytest.mark.slow
def test_the_proxy_variables_carry_the_downloads_and_its_password_is_not_shown(tmp_path, index, proxy):
    """Before: there were no such variables; the play ran, the proxy was never asked."""
    extra = {
        "kt_python_env_pip_index_url": f"http://127.0.0.1:{index.port}/simple",
        "kt_python_env_http_proxy": f"http://lab:s3cret@127.0.0.1:{proxy.port}",
    }
    rc, output = _install(tmp_path, extra, flags=["-v"])
    assert rc == 0 and _installed(tmp_path), output[-3000:]
    through = [(url, auth) for url, auth in proxy.asked if f"/simple/{PACKAGE}/" in url]
    assert through and through[0][1] == "Basic " + base64.b64encode(b"lab:s3cret").decode(), proxy.asked
    assert "s3cret" not in output


def test_no_proxy_hosts_are_asked_directly(tmp_path, index, proxy):
    extra = {
        "kt_python_env_pip_index_url": f"http://127.0.0.1:{index.port}/simple",
        "kt_python_env_http_proxy": f"http://127.0.0.1:{proxy.port}",
        "kt_python_env_no_proxy": ["127.0.0.1"],
    }
    rc, output = _install(tmp_path, extra)
    assert rc == 0 and _installed(tmp_path) and _asked(index), output[-3000:]
    assert proxy.asked == []


def test_a_ca_bundle_lets_pip_trust_the_labs_https_mirror(tmp_path):
    """This host sets REQUESTS_CA_BUNDLE (Debian's system bundle), which requests lets win over PIP_CERT:
    the bundle goes in under every name. Before: no variable; pip refused the mirror's certificate."""
    make_wheel(tmp_path / "files")
    cert, key = self_signed(tmp_path / "tls")
    server = serve_index(tmp_path / "files", tls=(cert, key))
    try:
        system = {"REQUESTS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt", "PIP_CERT": "/dev/null/none"}
        extra = {
            "kt_python_env_pip_index_url": f"https://127.0.0.1:{server.port}/simple",
            "kt_python_env_ca_bundle": str(cert),
        }
        rc, output = _install(tmp_path, extra, env=system)
        assert rc == 0 and _installed(tmp_path), output[-3000:]
    finally:
        server.close()


# ---- bad input: refused before anything runs on the host ----


@pytest.mark.parametrize(
    ("given", "message"),
    [
        # slow: the params marked slow meet the same assert as proxy-without-scheme and missing-bundle (each
        # input's rule: test_kt_common_proxy_filters.py)
        (
            '{"kt_python_env_https_proxy": "lab:s3cret@proxy.lab:3128"}',
            "kt_python_env_https_proxy must be a proxy URL",
        ),
        pytest.param(
            '{"kt_python_env_http_proxy": "http://lab:s3cret@proxy.lab:3128/x y"}',
            "kt_python_env_http_proxy must be",
            marks=pytest.mark.slow,
        ),
        (
            '{"kt_python_env_no_proxy": ["mirror.lab", "http://10.0.0.5"]}',
            "kt_python_env_no_proxy must list hosts",
        ),
        pytest.param(
            '{"kt_python_env_ca_bundle": "certs/lab.pem"}',
            "kt_python_env_ca_bundle must be the absolute path",
            marks=pytest.mark.slow,
        ),
        (
            '{"kt_python_env_ca_bundle": "/nonexistent/lab.pem"}',
            "kt_python_env_ca_bundle must be the absolute path",
        ),
    ],
    ids=["proxy-without-scheme", "proxy-with-space", "no-proxy-url", "relative-bundle", "missing-bundle"],
)
def test_bad_network_settings_are_refused_before_the_profile_check(tmp_path, given, message):
    rc, output, calls = run_validate(tmp_path, [given])
    assert rc != 0 and message in output, output[-3000:]
    assert "s3cret" not in output
    assert calls == ""  # nothing ran on the host: not even the profile check


def test_good_network_settings_pass_on_to_the_profile_check(tmp_path):
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    given = (
        '{"kt_python_env_https_proxy": "http://lab:s3cret@proxy.lab:3128", "kt_python_env_http_proxy": '
        '"socks5h://10.0.0.1:1080/", "kt_python_env_no_proxy": "mirror.lab,.lab.example,10.0.0.0/8", '
        f'"kt_python_env_ca_bundle": "{tmp_path / "ca.pem"}"}}'
    )
    rc, output, calls = run_validate(tmp_path, [given])
    assert calls.startswith("profile check kt-0.7 --json"), output[-3000:]
    assert "s3cret" not in output
