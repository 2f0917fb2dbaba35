"""kt_preflight run whole on localhost (its tool venv under tmp_path): the message a failed run ends with
names what failed, and a python that cannot hold ktinfra is refused before anything is installed."""

from __future__ import annotations

import sys

import pytest
from role_play import run_play

PREFLIGHT = [
    {"ansible.builtin.setup": {"gather_subset": ["min"]}},
    {"ansible.builtin.include_role": {"name": "kt_preflight"}},
]


def _extra(tmp_path) -> dict:
    (tmp_path / "wheelhouse").mkdir(exist_ok=True)
    return {
        "kt_preflight_tool_dir": str(tmp_path / "opt" / "tool"),
        "kt_preflight_build_dir": str(tmp_path / "dist"),
        "kt_preflight_wheelhouse": str(tmp_path / "wheelhouse"),
        "kt_preflight_python": getattr(sys, "_base_executable", sys.executable),
        "kt_preflight_check_envs": False,
    }


def _last_error(output: str) -> str:
    return [line for line in output.splitlines() if line.startswith("fatal:")][-1]


def test_a_model_ktinfra_does_not_know_is_named_in_the_final_message(tmp_path):
    """Before: "preflight failed: One or more items failed", ktinfra's own error only in the loop's output
    further up."""
    extra = _extra(tmp_path) | {"kt_preflight_requests": [{"model": "Qwen3-30B-A3", "mode": "serve"}]}
    rc, output = run_play(tmp_path, PREFLIGHT, extra)
    assert rc != 0, output[-3000:]
    last = _last_error(output)
    assert "preflight failed: Qwen3-30B-A3 (serve): error: unknown model 'Qwen3-30B-A3'" in last, last
    assert "One or more items failed" not in last
    assert not (tmp_path / "opt").exists()  # the rescue removed the tool venv this run made


# slow: the same probe and refusal of /nonexistent/py, before the OS packages and the venv, as
# test_preflight_review2_index_url.py::test_an_index_url_with_its_scheme_passes_the_check[http://10.0.0.1:3141/root/pypi/+simple/]  # noqa: E501
@pytest.mark.slow
def test_a_python_that_does_not_run_is_refused_before_the_os_packages(tmp_path):
    """Before: the probe's failure read as "python3-venv missing": apt installed python3-venv and python3-pip
    on the host, then the venv create failed with "preflight failed: [Errno 2] No such file or directory"."""
    python = tmp_path / "no" / "python3.12"
    rc, output = run_play(tmp_path, PREFLIGHT, _extra(tmp_path) | {"kt_preflight_python": str(python)})
    assert rc != 0, output[-3000:]
    last = _last_error(output)
    assert f"preflight failed: kt_preflight_python {python} cannot make ktinfra's tool venv:" in last, last
    assert "No such file or directory" in last and "Python 3.10 or later" in last, last
    assert "Look for the OS packages" not in output and "Create the venv" not in output, output[-3000:]
    assert "changed:" not in output and not (tmp_path / "opt").exists(), output[-3000:]


def test_relative_paths_and_a_pip_timeout_below_one_second_are_refused_first(tmp_path):
    """Before: a relative tool venv was made under the remote user's working directory, and pip got
    --timeout 0 (no timeout: a dead mirror hangs the play) or -1 (a ValueError traceback), each after the OS
    packages were looked at and installed."""
    extra = _extra(tmp_path) | {
        "kt_preflight_tool_dir": "opt/tool",
        "kt_preflight_wheelhouse": "wheelhouse",
        "kt_preflight_pip_timeout": 0,
    }
    rc, output = run_play(tmp_path, PREFLIGHT, extra)
    assert rc != 0, output[-3000:]
    last = _last_error(output)
    assert "kt_preflight_tool_dir must be an absolute directory other than /" in last, last
    assert "(got opt/tool)" in last and "kt_preflight_wheelhouse must be an absolute path" in last, last
    assert "kt_preflight_pip_timeout must be 1 second or more (got 0)" in last, last
    assert "Gather the OS facts" not in output and "changed:" not in output, output[-3000:]
    for tool_dir in ("/", "//opt", "/opt/..", "/opt/../etc"):  # '/opt/..' is /: the rescue would empty it
        rc, output = run_play(tmp_path, PREFLIGHT, _extra(tmp_path) | {"kt_preflight_tool_dir": tool_dir})
        assert rc != 0 and f"(got {tool_dir})" in _last_error(output), output[-3000:]
    assert not (tmp_path / "opt").exists()
