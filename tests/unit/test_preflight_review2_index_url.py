"""kt_preflight run whole on localhost (its tool venv under tmp_path): a pip index URL without its scheme is
refused first. Before: the wheel was built, the tool venv made and pip 23 stopped with a traceback ("Can't mix
absolute and relative paths"), on a host also after the OS packages for the venv were installed."""

from __future__ import annotations

import pytest
from role_play import run_play
from test_kt_preflight_plans import PREFLIGHT, _extra, _last_error


# slow: the params marked slow meet the same assert (kt_common's ktinfra_pip_not_indexes) as
# [pypi.mirror.example/simple]
@pytest.mark.parametrize(
    "url",
    [
        "pypi.mirror.example/simple",
        pytest.param("mirror:8080/simple", marks=pytest.mark.slow),
        pytest.param("//mirror/simple", marks=pytest.mark.slow),
    ],
)
def test_an_index_url_without_its_scheme_is_refused_before_anything(tmp_path, url):
    rc, output = run_play(tmp_path, PREFLIGHT, _extra(tmp_path) | {"kt_preflight_pip_index_url": url})
    assert rc != 0, output[-3000:]
    last = _last_error(output)
    assert "kt_preflight_pip_index_url must be empty or a URL with its scheme" in last, last
    assert f"(got {url})" in last, last
    assert "Build the ktinfra wheel" not in output and "changed:" not in output, output[-3000:]
    assert not (tmp_path / "opt").exists() and not (tmp_path / "dist").exists()


# slow: [https://mirror.example/simple] passes the same assert to the same python check as
# [http://10.0.0.1:3141/root/pypi/+simple/]
@pytest.mark.parametrize(
    "url",
    [
        pytest.param("https://mirror.example/simple", marks=pytest.mark.slow),
        "http://10.0.0.1:3141/root/pypi/+simple/",
    ],
)
def test_an_index_url_with_its_scheme_passes_the_check(tmp_path, url):
    """Stopped at the python check (an unknown python), before any venv or install on the host."""
    extra = _extra(tmp_path) | {"kt_preflight_pip_index_url": url, "kt_preflight_python": "/nonexistent/py"}
    rc, output = run_play(tmp_path, PREFLIGHT, extra)
    assert "kt_preflight_pip_index_url must be" not in output, output[-3000:]
    assert "kt_preflight_python /nonexistent/py cannot make ktinfra's tool venv" in output, output[-3000:]
