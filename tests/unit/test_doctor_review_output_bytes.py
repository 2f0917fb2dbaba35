"""`ktinfra doctor` against a host whose programs print a byte that is not UTF-8 (kt-kernel's C++ side and the
libraries it loads log as they like: a path or a CPU name in a legacy encoding, a multi-byte character cut
off). testinfra decoded every command's output strictly, so the check that read it ended in an error reading
"UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff" instead of the check's own answer."""

from __future__ import annotations

import pytest
from test_doctor_review_kt_kernel import ISA_REFUSAL, kt_env

from ktinfra import doctor

# what the kt_kernel package writes at import: a line with bytes that are not UTF-8
NOISE = "import sys\nsys.stderr.buffer.write(b'kt-kernel: CPU \\xff\\xfe model\\n')\nsys.stderr.flush()\n"


def test_a_refusal_after_a_non_utf8_line_is_still_the_verdict(tmp_path):
    """The probe answers on stdout (exit 0): the line on stderr is not read."""
    python = kt_env(tmp_path, NOISE + f"raise RuntimeError({ISA_REFUSAL!r})\n")
    report = doctor.run(["local://"], "any", python=str(python), select="kt_kernel_imports")
    [check] = report.checks
    assert (check.status, check.message) == ("failed", f"{python}: RuntimeError: {ISA_REFUSAL}")


@pytest.mark.parametrize("signal_name", ["SIGILL", "SIGSEGV"])
def test_a_crash_after_a_non_utf8_line_fails_the_import_check_with_its_reason(tmp_path, signal_name):
    """The probe's python dies, its stderr is read: before, the check was an error reading
    "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 15"."""
    python = kt_env(tmp_path, NOISE + f"import os, signal\nos.kill(os.getpid(), signal.{signal_name})\n")
    report = doctor.run(["local://"], "any", python=str(python), select="kt_kernel_imports")
    [check] = report.checks
    assert check.status == "failed", (check.status, check.message)
    assert f"python was killed by {signal_name} while loading kt-kernel" in check.message, check.message
    assert "UnicodeDecodeError" not in check.message + check.output
