"""kt_python_env refuses a relative kt_python_env_src_dir or kt_python_env_uv_dir with its other input,
before the profile check and the install. `ktinfra profile check` refuses a relative root or wheelhouse, but
these two went on: the git sources were cloned and uv's venv made under the remote user's working directory,
and kt_train passed the relative checkout path on to `ktinfra render train --src-dir`."""

from __future__ import annotations

import json

import pytest
from test_envtune_review_pip_timeout import run_validate

REFUSED = "kt_python_env_src_dir and kt_python_env_uv_dir must be absolute paths"


@pytest.mark.parametrize(
    ("given", "bad"),
    [
        ({"kt_python_env_src_dir": "kt/src"}, "kt/src"),
        ({"kt_python_env_uv_dir": "opt/ktinfra/uv"}, "opt/ktinfra/uv"),
        ({"kt_python_env_uv_dir": "./uv"}, "./uv"),
    ],
)
def test_a_relative_directory_is_refused_before_the_profile_check(tmp_path, given, bad):
    rc, output, calls = run_validate(tmp_path, [json.dumps(given)])
    assert rc != 0
    assert REFUSED in output and json.dumps([bad]) in output, output[-3000:]
    assert calls == ""  # nothing ran on the host: not even the profile check


@pytest.mark.parametrize(
    "given", [{"kt_python_env_src_dir": "/srv/kt/src", "kt_python_env_uv_dir": "/srv/ktinfra/uv"}, {}]
)
def test_absolute_directories_pass_on_to_the_profile_check(tmp_path, given):
    rc, output, calls = run_validate(tmp_path, [json.dumps(given)])
    assert REFUSED not in output
    assert calls.startswith("profile check kt-0.7 --json"), output[-3000:]
