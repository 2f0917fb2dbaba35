"""kt_python_env refuses a pip trusted host given as a URL with its other input, before the profile check and
the install. pip's --trusted-host takes a host or host:port: http://mirror.lab made it trust a host named
'http' (the plain-http mirror stayed ignored, "not a trusted or secure host") and http://10.0.0.5:8080/simple
stopped it with a traceback ("Invalid IPv6 URL"), at the first download, after the OS packages, the wheelhouse
and the venvs were made."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_envtune_review_pip_timeout import run_validate

REFUSED = "kt_python_env_pip_trusted_hosts must be host names or host:port pairs"


def _pip_download(tmp_path, trusted: str) -> subprocess.CompletedProcess:
    """pip itself, offline, given `trusted` as its --trusted-host (what the role passes it)."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--isolated", "--dest", str(tmp_path / "dl"),
         "--index-url", "http://127.0.0.1:9/simple", "--retries", "0", "--timeout", "1",
         f"--trusted-host={trusted}", "no-such-package-ktinfra"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_pip_cannot_use_a_url_as_a_trusted_host(tmp_path):
    """What the check stands for: pip stops with a traceback on one, and a host:port is taken."""
    url = _pip_download(tmp_path, "http://10.0.0.5:8080/simple")
    assert url.returncode != 0 and "Traceback" in url.stderr and "Invalid IPv6 URL" in url.stderr, url.stderr
    host = _pip_download(tmp_path, "10.0.0.5:8080")
    assert "Traceback" not in host.stderr, host.stderr


@pytest.mark.parametrize(
    ("given", "bad"),
    [
        (["kt_python_env_pip_trusted_hosts=http://mirror.lab"], ["http://mirror.lab"]),
        (
            [json.dumps({"kt_python_env_pip_trusted_hosts": ["mirror.lab", "http://10.0.0.5:8080/simple"]})],
            ["http://10.0.0.5:8080/simple"],
        ),
        # slow: [host-and-path] meets the same assert (kt_common's ktinfra_pip_not_hosts) as [url-in-list]
        pytest.param(
            ["kt_python_env_pip_trusted_hosts=mirror.lab/simple"],
            ["mirror.lab/simple"],
            marks=pytest.mark.slow,
        ),
    ],
    ids=["url-string", "url-in-list", "host-and-path"],
)
def test_a_trusted_host_given_as_a_url_is_refused_before_the_profile_check(tmp_path, given, bad):
    rc, output, calls = run_validate(tmp_path, given)
    assert rc != 0
    assert REFUSED in output and json.dumps(bad) in output, output[-3000:]
    assert calls == ""  # nothing ran on the host: not even the profile check


@pytest.mark.parametrize(
    "given",
    [
        ["kt_python_env_pip_trusted_hosts=mirror.lab,10.0.0.5:8080"],
        # slow: [hosts-list] passes the same assert as [hosts-string] (each host's rule:
        # test_kt_common_pip_filters.py::test_trusted_hosts_pip_cannot_use)
        pytest.param(
            [json.dumps({"kt_python_env_pip_trusted_hosts": ["[fd00::5]:8080", "pypi.mirror.example"]})],
            marks=pytest.mark.slow,
        ),
        [],
    ],
    ids=["hosts-string", "hosts-list", "none"],
)
def test_hosts_pass_on_to_the_profile_check(tmp_path, given):
    rc, output, calls = run_validate(tmp_path, given)
    assert REFUSED not in output
    assert calls.startswith("profile check kt-0.7 --json"), output[-3000:]
