"""`ktinfra doctor`'s kt-kernel import check against real venvs whose kt_kernel refuses to import."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_doctor_envs import make_env

from ktinfra import doctor

# kt-kernel's _cpu_detect._validate_loaded_variant raises this at import where the installed extension
# needs a newer CPU ISA than the host's (a single-variant AMX build on an AVX2 host)
ISA_REFUSAL = (
    "The installed kt-kernel extension requires a newer CPU ISA than this host: detected=avx2, loaded=amx. "
    "Install a multi-variant wheel or rebuild for this machine."
)


def kt_env(tmp_path: Path, body: str) -> Path:
    python = make_env(tmp_path / "kt", {"kt-kernel": "0.7.2"}, ("kt_kernel",))
    next(python.parents[1].glob("lib/python*/site-packages/kt_kernel/__init__.py")).write_text(body)
    return python


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (f"raise RuntimeError({ISA_REFUSAL!r})\n", f"RuntimeError: {ISA_REFUSAL}"),
        ("raise ImportError('libnuma.so.1: cannot open shared object file')\n",
         "ImportError: libnuma.so.1: cannot open shared object file"),
    ],
)  # fmt: skip
def test_a_kt_kernel_that_refuses_to_import_fails_the_import_check_with_its_reason(tmp_path, body, reason):
    """A RuntimeError at import (not an ImportError) ended the probe in a traceback: every kt-kernel check
    was an error reading 'kthost.ProbeError: probe kt_kernel_moe ... exited 1: Traceback (most recent
    call last): ...', kt-kernel's own reason cut off at the end."""
    python = kt_env(tmp_path, body)
    report = doctor.run(["local://"], "any", python=str(python), select="kt_kernel_imports")
    [check] = report.checks
    assert (check.status, check.message) == ("failed", f"{python}: {reason}")
    assert not report.ok


@pytest.mark.parametrize("signal_name", ["SIGILL", "SIGSEGV"])
def test_a_kt_kernel_import_killed_by_a_signal_fails_the_import_check(tmp_path, signal_name):
    """Before: the probe's python died (SIGILL: a variant built for another CPU) and every kt-kernel check
    was an error reading 'probe kt_kernel_moe ... exited 132' with an empty stderr."""
    python = kt_env(tmp_path, f"import os, signal\nos.kill(os.getpid(), signal.{signal_name})\n")
    report = doctor.run(["local://"], "any", python=str(python), select="kt_kernel_imports")
    [check] = report.checks
    assert check.status == "failed", (check.status, check.message)
    assert f"python was killed by {signal_name} while loading kt-kernel" in check.message
    assert ("instructions this CPU lacks" in check.message) is (signal_name == "SIGILL")
    assert not report.ok
