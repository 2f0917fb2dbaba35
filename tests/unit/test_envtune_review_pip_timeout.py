"""kt_python_env's pip timeout is checked with the role's other input, before the profile check and the
install: a negative one (the argument spec's int passes it) stopped the first download with urllib3's
traceback, after the OS packages, the wheelhouse and the venv were made."""

from __future__ import annotations

import pytest
from role_play import logging_ktinfra, run_play

VALIDATE = [{"ansible.builtin.include_role": {"name": "kt_python_env", "tasks_from": "validate"}}]


def run_validate(tmp_path, extra_vars: list[str]) -> tuple[int, str, str]:
    """kt_python_env's validate entry point with `-e` EXTRA_VARS: (rc, output, the ktinfra calls it made)."""
    ktinfra = logging_ktinfra(tmp_path / "kt" / "bin" / "ktinfra")
    extra = {
        "kt_preflight_ktinfra_exe": str(ktinfra),
        "kt_python_env_envs": ["inference"],
        "kt_python_env_root": str(tmp_path / "envs"),
        "kt_python_env_wheelhouse": str(tmp_path / "wh"),
    }
    rc, output = run_play(tmp_path, VALIDATE, extra, extra_vars)
    log = ktinfra.with_name("ktinfra.log")
    return rc, output, log.read_text() if log.exists() else ""


def _validate(tmp_path, timeout: str) -> tuple[int, str, str]:
    return run_validate(tmp_path, [f"kt_python_env_pip_timeout={timeout}"])


@pytest.mark.parametrize("timeout", ["-5", "0"])
def test_a_pip_timeout_below_one_second_is_refused_before_the_profile_check(tmp_path, timeout):
    rc, output, calls = _validate(tmp_path, timeout)
    assert rc != 0
    wanted = f"kt_python_env_pip_timeout must be a number of seconds, at least 1 (got {timeout})"
    assert wanted in output, output[-3000:]
    assert calls == ""  # nothing ran on the host: not even the profile check


def test_a_pip_timeout_of_seconds_passes_on_to_the_profile_check(tmp_path):
    rc, output, calls = _validate(tmp_path, "120")
    assert "kt_python_env_pip_timeout must be" not in output
    assert calls.startswith("profile check kt-0.7 --json"), output[-3000:]  # (its answer is this host's)
