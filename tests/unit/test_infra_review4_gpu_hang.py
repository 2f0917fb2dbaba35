"""The GPU checks' nvidia-smi listing on a real testinfra local host where nvidia-smi hangs (a hung driver,
a GPU that fell off the bus): a real process that never answers."""

from __future__ import annotations

import importlib
import sys
import threading
import time
from pathlib import Path

import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
gpu_checks = importlib.import_module("test_gpu")


def test_a_hung_nvidia_smi_is_given_up_after_the_timeout(tmp_path, monkeypatch):
    """nvidia-smi ran without a bound: the suite, and doctor, waited for it for good."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 600\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(gpu_checks, "NVIDIA_SMI_TIMEOUT", 2, raising=False)
    host = testinfra.get_host("local://")
    got: dict = {}
    start = time.monotonic()
    worker = threading.Thread(target=lambda: got.update(gpu_checks.list_gpus(host)), daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "nvidia-smi was waited for past 20 s"
    assert got == {"gpus": [], "why": "nvidia-smi did not answer within 2 s (a hung driver or GPU)"}
    assert time.monotonic() - start < 10
