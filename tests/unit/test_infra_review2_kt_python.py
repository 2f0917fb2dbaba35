"""The KT host suite's kt-kernel checks run in the env that holds kt-kernel.

kt-0.4-autodl's SFT env (found by llamafactory) has no kt_kernel module: its ktransformers 0.4.2 wheel
brings its own cpuinfer_ext. `--kt-role sft` ran every kt-kernel check in that env and failed ("No module
named 'kt_kernel'") on a host whose inference env holds kt-kernel. The suite runs here for real (local://)
against env pythons laid out under $HOME/miniconda3/envs, one of the suite's own prefixes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

INFRA = Path(__file__).parents[1] / "infra"


def _env(home: Path, name: str, module: str, source: str) -> Path:
    """An env python: this interpreter with a site folder holding `module`."""
    root = home / "miniconda3" / "envs" / name
    site = root / "site"
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text(source)
    (root / "bin").mkdir()
    python = root / "bin" / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    os.chmod(python, 0o755)
    return python


KT_KERNEL = "import types\n__cpu_variant__ = 'avx2'\nkt_kernel_ext = types.SimpleNamespace(moe=None)\n"


def _suite(home: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", str(INFRA), "--hosts=local://", "-p", "no:cacheprovider",
               "-q", "-rA", "-s", "-k", "kt_kernel_imports", *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HOME": str(home)})


def test_sft_role_checks_kt_kernel_in_the_inference_env_when_the_sft_env_lacks_it(tmp_path):
    _env(tmp_path, "kt-sft", "llamafactory", "")
    _env(tmp_path, "kt-kernel", "kt_kernel", KT_KERNEL)
    done = _suite(tmp_path, "--kt-role=sft", "--kt-profile=kt-0.4-autodl")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout and "No module named 'kt_kernel'" not in done.stdout
    assert "kt-kernel None variant=avx2" in done.stdout  # the inference env's kt-kernel imported


def test_sft_env_without_kt_kernel_and_no_inference_env(tmp_path):
    """No env holds kt-kernel: role sft fails naming the SFT env that lacks it; role any skips it."""
    sft = _env(tmp_path, "kt-sft", "llamafactory", "")
    failed = _suite(tmp_path, "--kt-role=sft", "--kt-profile=kt-0.4-autodl")
    assert failed.returncode == 1, failed.stdout[-3000:]
    assert "kt-kernel required for role 'sft' but absent: " in failed.stdout
    assert f"sft env {sft} has no kt_kernel module" in failed.stdout
    skipped = _suite(tmp_path, "--kt-role=any", "--kt-profile=kt-0.4-autodl")
    assert "1 skipped" in skipped.stdout and "not applicable: kt-kernel absent" in skipped.stdout
    assert "No module named 'kt_kernel'" not in skipped.stdout
