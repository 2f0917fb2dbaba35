"""kt_python_env refuses a pip index without a scheme with its other input, before the profile check and the
install: pip took `pypi.mirror.example/simple` as a local path and stopped with a traceback ("Can't mix
absolute and relative paths") at the first download, after the OS packages and the venv were made."""

from __future__ import annotations

import json

import pytest
from test_envtune_review_pip_timeout import run_validate


def _validate(tmp_path, given: dict) -> tuple[int, str, str]:
    return run_validate(tmp_path, [json.dumps(given)])


@pytest.mark.parametrize(
    ("given", "bad"),
    [
        ({"kt_python_env_pip_index_url": "pypi.mirror.example/simple"}, "pypi.mirror.example/simple"),
        (
            {"kt_python_env_pip_extra_index_urls": ["https://ok.example/simple", "mirror/simple"]},
            "mirror/simple",
        ),
        ({"kt_python_env_pip_index_url": "ftp://mirror.example/simple"}, "ftp://mirror.example/simple"),
    ],
)
def test_an_index_without_a_scheme_is_refused_before_the_profile_check(tmp_path, given, bad):
    rc, output, calls = _validate(tmp_path, given)
    assert rc != 0
    assert "must be URLs with their scheme" in output and json.dumps([bad]) in output, output[-3000:]
    assert calls == ""  # nothing ran on the host: not even the profile check


@pytest.mark.parametrize(
    "given",
    [
        {"kt_python_env_pip_index_url": "https://mirrors.example.cn/pypi/simple"},
        {"kt_python_env_pip_extra_index_urls": ["file:///srv/wheels/simple", "http://10.0.0.2:8080/simple"]},
        {},
    ],
)
def test_urls_pass_on_to_the_profile_check(tmp_path, given):
    rc, output, calls = _validate(tmp_path, given)
    assert "must be URLs with their scheme" not in output
    assert calls.startswith("profile check kt-0.7 --json"), output[-3000:]
