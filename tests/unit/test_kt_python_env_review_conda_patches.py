"""kt_python_env's conda patches (tasks/env.yml) with a stand-in conda on localhost: applied when the env's
install is due, not on every run (each call solves the env against the channels: the network, minutes on an
AutoDL container, and an offline run that asked conda-forge)."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from role_play import REPO, run_play

ENV = [{"ansible.builtin.include_role": {"name": "kt_python_env", "tasks_from": "env"}}]
# `conda create -y -p PREFIX python=X` (and `conda install ... pip`) makes a venv there, python then pip, and
# then the pip package's conda-meta record, as conda writes one after each package's files; another
# `conda install` says what conda says for packages already in the env. Every call is logged.
FAKE_CONDA = """#!/bin/sh
echo "$*" >> {log}
case "$1 $* " in
  create*|*" pip "*) {python} -m venv "$4" && mkdir -p "$4/conda-meta" && : >"$4/conda-meta/pip-24.0-0.json";;
  install*) echo "# All requested packages already installed." ;;
esac
"""


def _setup(tmp: Path, patches: list[dict]) -> dict:
    wrapper = tmp / "ktinfra"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m ktinfra "$@"\n')
    conda = tmp / "conda"
    base_python = getattr(sys, "_base_executable", sys.executable)
    conda.write_text(FAKE_CONDA.format(log=tmp / "conda.log", python=base_python))
    for exe in (wrapper, conda):
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    env = {"name": "probe", "packages": [], "conda_patches": patches}
    profile = {"name": "patches", "generation": "legacy", "python": "3.11", "glibc_min": "2.35",
               "kernel_min": "5.16", "envs": {"inference": env}}  # fmt: skip
    (tmp / "profile.yaml").write_text(yaml.safe_dump(profile))
    (tmp / "wh").mkdir(exist_ok=True)
    return {
        "kt_preflight_ktinfra_exe": str(wrapper),
        "kt_python_env_profile": str(tmp / "profile.yaml"),
        "kt_python_env__profile_ref": str(tmp / "profile.yaml"),
        "kt_python_env__profile_pending": False,
        "kt_python_env_offline": True,
        "kt_python_env_install": {
            "manager": "conda", "conda_exe": str(conda), "python": "3.11", "wheelhouse": str(tmp / "wh"),
            "profile": "patches", "pip": {"index_url": "", "extra_index_urls": []},
        },
        "kt_python_env_spec": {
            "name": "probe", "key": "inference", "prefix": str(tmp / "env"), "packages": [], "wheels": [],
            "conda_patches": patches, "git": [],
        },
    }  # fmt: skip


def _conda_calls(tmp: Path) -> list[str]:
    log = tmp / "conda.log"
    calls = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return calls


# slow: re-runs; a new env's patch call:
# test_kt_python_env_proxy_secret.py::test_conda_gets_the_proxy_from_the_file_and_vvv_does_not_show_it;
# the same kt_python_env__install_due, false on an unchanged re-run:
# test_kt_python_env_secret_files.py::test_the_env_records_are_0600_and_the_freeze_is_not_printed
@pytest.mark.slow
def test_conda_patches_are_applied_when_the_install_is_due_only(tmp_path):
    """Before: `conda install -c conda-forge libstdcxx-ng ...` ran on every run, offline too
    (kt_python_env_offline says the network is never touched): a re-run with nothing to do asked the channels
    again."""
    patch = {"channel": "conda-forge", "packages": ["libstdcxx-ng"]}
    extra = _setup(tmp_path, [patch])
    rc, output = run_play(tmp_path, ENV, extra)
    calls = _conda_calls(tmp_path)
    assert rc == 0 and [c.split()[0] for c in calls] == ["create", "install"], output[-3000:] + str(calls)
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert _conda_calls(tmp_path) == [], output[-3000:]
    # a profile whose patches change makes the install due, as a pin bump does
    moved = _setup(tmp_path, [patch | {"packages": ["libstdcxx-ng", "gcc_impl_linux-64"]}])
    rc, output = run_play(tmp_path, ENV, moved)
    calls = _conda_calls(tmp_path)
    assert rc == 0 and calls == [
        "install -y -p {} -c conda-forge libstdcxx-ng gcc_impl_linux-64".format(tmp_path / "env")
    ], output[-3000:] + str(calls)
    rc, output = run_play(tmp_path, ENV, moved)
    assert rc == 0 and "changed=0" in output and _conda_calls(tmp_path) == [], output[-3000:]


# slow: a cut-off run; the same conda-meta pip-record check runs on every conda env (a whole one: no
# completion call) in
# test_kt_python_env_proxy_secret.py::test_conda_gets_the_proxy_from_the_file_and_vvv_does_not_show_it;
# the venv manager's repair of an env cut off without pip:
# test_kt_common_venv.py::test_a_supervisord_venv_cut_off_by_ctrl_c_is_created_again
@pytest.mark.slow
def test_a_conda_env_cut_off_before_pip_is_completed(tmp_path):
    """`conda create` links python before pip (pip depends on it): one cut off there (Ctrl-C, a dropped SSH
    connection) left bin/python without pip. Before: `creates: bin/python` kept it, and every later run failed
    at `<env>/bin/pip install` (No such file or directory)."""
    extra = _setup(tmp_path, [])
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", "--without-pip", tmp_path / "env"], check=True)  # the cut-off
    rc, output = run_play(tmp_path, ENV, extra)
    calls = _conda_calls(tmp_path)
    assert rc == 0 and calls == [f"install -y -p {tmp_path / 'env'} python=3.11 pip"], output[-3000:] + str(
        calls
    )
    assert (tmp_path / "env" / "bin" / "pip").exists()
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0 and "changed=0" in output and _conda_calls(tmp_path) == [], output[-3000:]
