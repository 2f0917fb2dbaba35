"""doctor over local:// put its own venv's bin first on the suite's PATH (for ansible://, whose backend runs
ansible from PATH); local:// runs the target's commands with that PATH, so ktinfra's python3 hid the one of
the env the user activated (a conda env named otherwise than the profile's, found as python3 on PATH): the
env was 'not installed' and role serve failed 'kt-kernel required ... but absent'. Real suite over local://;
the activated env's python3 is this python with a kt_kernel stand-in module."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ktinfra import doctor


def test_the_activated_envs_python3_is_the_one_found(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "kt_kernel").mkdir(parents=True)
    (site / "kt_kernel" / "__init__.py").write_text("raise ImportError('activated stand-in')\n")
    env_bin = tmp_path / "myenv" / "bin"
    env_bin.mkdir(parents=True)
    python3 = env_bin / "python3"
    python3.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python3.chmod(0o755)
    # the user's PATH: the activated env first, ktinfra's venv somewhere after it
    monkeypatch.setenv("PATH", f"{env_bin}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin")
    monkeypatch.delenv("CONDA_EXE", raising=False)
    report = doctor.run(["local://"], role="any", select="kt_kernel_imports")
    [check] = report.checks
    assert check.status == "failed" and "activated stand-in" in check.message, check
    assert str(python3) in check.message


def test_ansible_hosts_still_get_the_venvs_tools_first(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    venv_bin = str(Path(sys.executable).parent)
    assert doctor._suite_env(None, ansible=True)["PATH"].split(os.pathsep)[0] == venv_bin
    # last otherwise: still the probes' python3 where the PATH has none
    assert doctor._suite_env(None, ansible=False)["PATH"] == f"/usr/bin:/bin{os.pathsep}{venv_bin}"


def test_without_python3_on_path_the_probes_still_run_with_ktinfras(tmp_path, monkeypatch):
    """ktinfra run by its path on a host whose PATH has no python3 (a uv-managed python): the venv's
    python3, last on the suite's PATH, runs the probes (first was the rule before; none at all fails every
    CPU check 'no python3 on the PATH of local://')."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):  # this PATH, every python left out
        for tool in os.listdir(folder) if os.path.isdir(folder) else []:
            if not tool.startswith("python") and not (bin_dir / tool).exists():
                os.symlink(os.path.join(folder, tool), bin_dir / tool)
    monkeypatch.setenv("PATH", str(bin_dir))
    report = doctor.run(["local://"], role="any", select="amx_cpu_flags")
    [check] = report.checks
    assert check.status in ("passed", "skipped"), check  # AMX or not: the probe ran
