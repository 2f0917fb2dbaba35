"""The host suite looked for the profile's envs in a fixed list of prefixes only, but kt_python_env makes its
conda envs in <conda>/envs/NAME wherever the target's conda is (kt_python_env_conda_exe=/opt/miniconda3/bin/
conda, a ~/miniforge3 on PATH): such an env was 'not installed', every env check skipped and role serve failed
'kt-kernel required ... but absent' on a host that has it; the message did not say how to name the env.
Real suite runs over local:// (ktinfra doctor), a conda stand-in on PATH and an env python holding a
kt_kernel stand-in module."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ktinfra import doctor


def _conda_with_env(root: Path, env_name: str) -> Path:
    """ROOT/bin/conda and ROOT/envs/ENV/bin/python (this python, with a kt_kernel module on its path)."""
    (root / "bin").mkdir(parents=True)
    conda = root / "bin" / "conda"
    conda.write_text("#!/bin/sh\nexit 0\n")
    conda.chmod(0o755)
    site = root / "envs" / env_name / "site"
    (site / "kt_kernel").mkdir(parents=True)
    (site / "kt_kernel" / "__init__.py").write_text("raise ImportError('stand-in')\n")
    python = root / "envs" / env_name / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


def test_an_env_under_the_targets_conda_is_found(tmp_path, monkeypatch):
    python = _conda_with_env(tmp_path / "miniforge3", "kt-kernel")
    monkeypatch.setenv("PATH", f"{tmp_path / 'miniforge3' / 'bin'}:{os.environ['PATH']}")
    monkeypatch.delenv("CONDA_EXE", raising=False)
    report = doctor.run(["local://"], role="any", select="kt_kernel_imports")
    [check] = report.checks
    # the env is found: the import check runs there (and fails on the stand-in's ImportError)
    assert check.status == "failed", check
    assert str(python) in check.message and "stand-in" in check.message, check.message


def test_an_env_not_found_says_how_to_name_it(tmp_path, monkeypatch):
    monkeypatch.delenv("CONDA_EXE", raising=False)
    report = doctor.run(["local://"], role="any", select="env_matches_profile_pins")
    by_id = {c.id: c for c in report.checks}
    inference, sft = (
        by_id["envs.env_matches_profile_pins[inference]"],
        by_id["envs.env_matches_profile_pins[sft]"],
    )
    assert inference.status == sft.status == "skipped"
    assert "(an env elsewhere: ktinfra doctor --python PATH, pytest --kt-python=PATH)" in inference.message
    assert "(an env elsewhere: ktinfra doctor --sft-python PATH, pytest --kt-sft-python=PATH)" in sft.message
