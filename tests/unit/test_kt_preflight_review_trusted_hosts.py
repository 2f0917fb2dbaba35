"""kt_preflight run whole on localhost (its tool venv under tmp_path): a pip trusted host given as a URL is
refused first, with kt_python_env's rule (host or host:port). kt_preflight_pip_trusted_hosts defaults to
kt_python_env_pip_trusted_hosts, and preflight's tool install runs before kt_python_env's validate: before,
the wheel was built, the tool venv made and pip stopped with a traceback ("Invalid IPv6 URL"), on a host
also after the OS packages for the venv were installed."""

from __future__ import annotations

import json

import pytest
from role_play import run_play
from test_kt_preflight_plans import PREFLIGHT, _extra, _last_error

REFUSED = "kt_preflight_pip_trusted_hosts (default: kt_python_env_pip_trusted_hosts) must be host names or"


@pytest.mark.parametrize(
    ("given", "bad"),
    [
        # slow: [url-string] meets the same assert as [kt-python-env-default] (a string as well, split by
        # ktinfra_list)
        pytest.param(
            {"kt_preflight_pip_trusted_hosts": "http://10.0.0.5:8080/simple"},
            ["http://10.0.0.5:8080/simple"],
            marks=pytest.mark.slow,
        ),
        ({"kt_preflight_pip_trusted_hosts": ["mirror.lab", "mirror.lab/simple"]}, ["mirror.lab/simple"]),
        # kt_python_env's list, which preflight takes as its own by default
        ({"kt_python_env_pip_trusted_hosts": "mirror.lab,http://mirror.lab"}, ["http://mirror.lab"]),
    ],
    ids=["url-string", "host-and-path-in-list", "kt-python-env-default"],
)
def test_a_trusted_host_given_as_a_url_is_refused_before_anything(tmp_path, given, bad):
    rc, output = run_play(tmp_path, PREFLIGHT, _extra(tmp_path) | given)
    assert rc != 0, output[-3000:]
    last = json.loads(_last_error(output).split("=> ", 1)[1])["msg"]
    assert REFUSED in last and f"not URLs (got {json.dumps(bad)})" in last, last
    assert "Build the ktinfra wheel" not in output and "changed:" not in output, output[-3000:]
    assert not (tmp_path / "opt").exists() and not (tmp_path / "dist").exists()


@pytest.mark.parametrize(
    "given",
    [
        # slow: the params marked slow pass the same assert to the same python check as
        # [kt-python-env-default] (each host's rule:
        # test_kt_common_pip_filters.py::test_trusted_hosts_pip_cannot_use)
        pytest.param({"kt_preflight_pip_trusted_hosts": "mirror.lab,10.0.0.5:8080"}, marks=pytest.mark.slow),
        pytest.param(
            {"kt_preflight_pip_trusted_hosts": ["[fd00::5]:8080", "pypi.mirror.example"]},
            marks=pytest.mark.slow,
        ),
        {"kt_python_env_pip_trusted_hosts": ["mirror.lab"]},
    ],
    ids=["hosts-string", "hosts-list", "kt-python-env-default"],
)
def test_hosts_pass_the_check(tmp_path, given):
    """Stopped at the python check (an unknown python), before any venv or install on the host."""
    extra = _extra(tmp_path) | given | {"kt_preflight_python": "/nonexistent/py"}
    rc, output = run_play(tmp_path, PREFLIGHT, extra)
    assert "must be host names or" not in output, output[-3000:]
    assert "kt_preflight_python /nonexistent/py cannot make ktinfra's tool venv" in output, output[-3000:]
