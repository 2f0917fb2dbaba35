"""`ktinfra doctor`'s GPU checks where nvidia-smi lists the GPUs and exits 14 (a corrupt infoROM; 15 for a GPU
that fell off the bus), as ktinfra facts' capture knows it does. nvidia-smi on PATH is a script printing the
H200 host's rows after the warning nvidia-smi prints on stdout."""

from __future__ import annotations

import os

from ktinfra import doctor

ROW = "0, NVIDIA H200, 143771, 9.0, 580.159.04, GPU-eba1675f-80ed-12b2-82e6-e05e0cb93f6f, Disabled"
WARNING = "WARNING: infoROM is corrupted at gpu 0000:00:06.0"
NVIDIA_SMI = f"""#!/bin/sh
echo '{WARNING}'
case "$1" in
  --query-gpu=*) echo '{ROW}' ;;
  *) echo '| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |' ;;
esac
exit 14
"""


def test_gpus_listed_before_a_failing_exit_are_present_and_checked(tmp_path, monkeypatch):
    """They counted as no GPU: under role any every GPU check was skipped as 'not applicable: NVIDIA GPU
    absent', so a host whose nvidia-smi reports an error passed."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(NVIDIA_SMI)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    report = doctor.run(["local://"], "any", select="gpu and not torch")
    checks = {c.id: c for c in report.checks}
    assert {i: c.status for i, c in checks.items()} == {
        "gpu.gpu_visible": "failed",
        "gpu.gpu_compute_capability": "passed",
        "gpu.gpu_driver_and_cuda_reported": "passed",
    }, checks
    assert checks["gpu.gpu_visible"].message == f"nvidia-smi exited 14 ({WARNING}) after listing GPU 0"
