"""`ktinfra doctor` against a host whose programs print a byte that is not UTF-8 (kt-kernel's C++ side and the
libraries it loads log as they like: a path or a CPU name in a legacy encoding, a multi-byte character cut
off). testinfra decoded every command's output strictly, so the check that read it ended in an error reading
"UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff" instead of the check's own answer."""

from __future__ import annotations

import os

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


ROW = "0, NVIDIA H200, 143771, 9.0, 580.159.04, GPU-eba1675f-80ed-12b2-82e6-e05e0cb93f6f, Disabled"
# nvidia-smi's table names each GPU process by its command line, whatever bytes that holds
NVIDIA_SMI = b"""#!/bin/sh
case "$1" in
  --query-gpu=*) echo '%s' ;;
  *) printf '| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |\\n'
     printf '|    0   N/A  N/A   4242   C   /srv/mod\\350les/python   80000MiB |\\n' ;;
esac
""" % ROW.encode()


def test_an_nvidia_smi_process_name_that_is_not_utf8_leaves_the_gpu_checks_their_answers(
    tmp_path, monkeypatch
):
    """Before: every GPU check was an error reading "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe8"
    (a process started from a Latin-1 path), the GPU itself fine."""
    tool = tmp_path / "nvidia-smi"
    tool.write_bytes(NVIDIA_SMI)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    report = doctor.run(["local://"], "any", select="gpu and not torch")
    assert {c.id: (c.status, c.message) for c in report.checks} == {
        "gpu.gpu_visible": ("passed", ""),
        "gpu.gpu_compute_capability": ("passed", ""),
        "gpu.gpu_driver_and_cuda_reported": ("passed", ""),
    }
