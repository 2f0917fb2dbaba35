"""kt_python_env refuses a kt_python_env_uv_version that is not a release number MAJOR.MINOR.PATCH with its
other input, before the profile check and the install. uv.yml looks for uv's wheel as uv-VERSION-*.whl and
for its binary by `uv VERSION`: with 0.13 (pip's uv==0.13 fetches uv-0.13.0-...whl) neither ever matched, so
every run downloaded and reinstalled uv and reported changed, and an offline run fell back to pip with the
wheel in the wheelhouse; `latest` failed the download after the OS packages and the wheelhouse were made."""

from __future__ import annotations

import json

import pytest
from test_envtune_review_pip_timeout import run_validate

REFUSED = "kt_python_env_uv_version must be a uv release as MAJOR.MINOR.PATCH"


# slow: the params marked slow fail the same regex as [0.13] (no patch number) does; [0.13.8 ] checks its end
@pytest.mark.parametrize(
    "version",
    [
        "0.13",
        pytest.param("latest", marks=pytest.mark.slow),
        "0.13.8 ",
        pytest.param(">=0.13", marks=pytest.mark.slow),
    ],
)
def test_a_uv_version_that_is_not_a_release_number_is_refused_before_the_profile_check(tmp_path, version):
    rc, output, calls = run_validate(tmp_path, [json.dumps({"kt_python_env_uv_version": version})])
    assert rc != 0
    assert f"{REFUSED}, as 0.13.8 (got {json.dumps(version)})" in output, output[-3000:]
    assert calls == ""  # nothing ran on the host: not even the profile check


# slow: [given0] passes the same assert as [given1] (the default release number)
@pytest.mark.parametrize(
    "given", [pytest.param(["kt_python_env_uv_version=0.9.30"], marks=pytest.mark.slow), []]
)
def test_a_release_number_passes_on_to_the_profile_check(tmp_path, given):
    rc, output, calls = run_validate(tmp_path, given)
    assert REFUSED not in output
    assert calls.startswith("profile check kt-0.7 --json"), output[-3000:]
