"""kt_python_env's env install (tasks/env.yml) run for real on localhost: a venv under tmp_path with one
small pin, its freeze and drift check by this checkout's ktinfra; then a pin bump under --check, failed,
and again."""

from __future__ import annotations

import hashlib
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from role_play import REPO, interrupt_play, run_play, task_output

ENV = [{"ansible.builtin.include_role": {"name": "kt_python_env", "tasks_from": "env"}}]


def _setup(tmp: Path, pin: str) -> dict:
    wrapper = tmp / "ktinfra"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m ktinfra "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    profile = {"name": "rerun", "generation": "current", "python": "3.11", "glibc_min": "2.35",
               "kernel_min": "5.16", "envs": {"inference": {"name": "probe", "packages": [pin]}}}  # fmt: skip
    (tmp / "profile.yaml").write_text(yaml.safe_dump(profile))
    (tmp / "wh").mkdir(exist_ok=True)
    return {
        "kt_preflight_ktinfra_exe": str(wrapper),
        "kt_python_env_profile": str(tmp / "profile.yaml"),
        # what validate.yml sets: the profile the envs are checked against, not waiting on a --check install
        "kt_python_env__profile_ref": str(tmp / "profile.yaml"),
        "kt_python_env__profile_pending": False,
        "kt_python_env_installer": "pip",
        "kt_python_env_install": {
            "manager": "venv", "python_exe": getattr(sys, "_base_executable", sys.executable),
            "wheelhouse": str(tmp / "wh"), "profile": "rerun",
            "pip": {"index_url": "", "extra_index_urls": []},
        },
        "kt_python_env_spec": {
            "name": "probe", "key": "inference", "prefix": str(tmp / "env"), "packages": [pin], "wheels": [],
            "conda_patches": [], "git": [],
        },
    }  # fmt: skip


def six_in(tmp: Path) -> str:
    python = tmp / "env" / "bin" / "python"
    return subprocess.check_output([python, "-c", "import six; print(six.__version__)"], text=True).strip()


@pytest.mark.slow
def test_a_pin_bump_is_previewed_by_check_and_a_failed_install_is_redone(tmp_path):
    """Before: the new pins were written before the install, so after a failed install the next run took
    them as installed and failed on drift for ever; and --check of a pin bump (a new record task) errored."""
    rc, output = run_play(tmp_path, ENV, _setup(tmp_path, "six==1.16.0"))
    assert rc == 0 and six_in(tmp_path) == "1.16.0", output[-3000:]
    # --check of a site profile that validate.yml would install first: no pin check against a file not there
    pending = _setup(tmp_path, "six==1.16.0") | {
        "kt_python_env__profile_ref": str(tmp_path / "profiles" / "new.yaml"),
        "kt_python_env__profile_pending": True,
    }
    rc, output = run_play(tmp_path, ENV, pending, flags=["--check"])
    assert rc == 0 and "the pin check of probe against it follows that install" in output, output[-3000:]
    bumped = _setup(tmp_path, "six==1.17.0")
    rc, output = run_play(tmp_path, ENV, bumped, flags=["--check"])
    assert rc == 0 and "would be (re)installed" in output, output[-3000:]
    dead = bumped | {"kt_python_env_pip_index_url": "http://127.0.0.1:9/simple"}
    rc, output = run_play(tmp_path, ENV, dead, env={"PIP_CONFIG_FILE": "/dev/null"})
    assert rc != 0 and six_in(tmp_path) == "1.16.0", output[-3000:]
    rc, output = run_play(tmp_path, ENV, bumped)
    assert rc == 0 and six_in(tmp_path) == "1.17.0", output[-3000:]
    rc, output = run_play(tmp_path, ENV, bumped)
    assert rc == 0 and "changed=0" in output, output[-3000:]


@pytest.mark.slow
def test_a_venv_cut_off_while_it_was_created_is_created_again(tmp_path):
    """Ctrl-C while `python -m venv` ran left bin/python without pip. Before: `creates: bin/python` skipped
    the venv from then on, and every re-run failed (pip wheel: no such file <env>/bin/pip)."""
    extra = _setup(tmp_path, "six==1.16.0")
    python, pip = tmp_path / "env" / "bin" / "python", tmp_path / "env" / "bin" / "pip"
    rc, output = interrupt_play(tmp_path, ENV, extra, python)
    assert rc != 0 and python.exists() and not pip.exists(), output[-3000:]
    rc, output = run_play(tmp_path, ENV, extra, flags=["--check"])  # predicts the repair, makes none
    repair = task_output(output, "Create again the venv that a cut-off run left without pip")
    assert rc == 0 and "changed:" in repair, output[-3000:]
    assert not pip.exists()
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0 and six_in(tmp_path) == "1.16.0", output[-3000:]
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0 and "changed=0" in output, output[-3000:]
    # a whole venv is never taken for a cut-off one: not when pip's configuration is broken either (that
    # fails `pip --version`; here the pip freeze fails, and the env stays as it is)
    (tmp_path / "bad-pip.conf").write_text("[global\n")
    rc, output = run_play(tmp_path, ENV, extra, env={"PIP_CONFIG_FILE": str(tmp_path / "bad-pip.conf")})
    assert "skipping:" in task_output(output, "Create again the venv that a cut-off run left without pip")
    assert six_in(tmp_path) == "1.16.0"


@pytest.mark.slow
def test_a_truncated_wheel_in_the_wheelhouse_is_fetched_again(tmp_path):
    """A pip wheel cut off while it copied a finished download into the wheelhouse leaves the file half
    written: the offline install fails on it, and the fill (pip wheel) writes it again. (uv's own wheel,
    which no fill replaces: test_kt_python_env_uv_rerun.py.)"""
    extra = _setup(tmp_path, "six==1.16.0")
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0, output[-3000:]
    (wheel,) = (tmp_path / "wh").glob("six-1.16.0-*.whl")
    whole = wheel.read_bytes()
    wheel.write_bytes(whole[: len(whole) // 2])
    subprocess.run(["rm", "-rf", tmp_path / "env"], check=True)  # a new host on the same wheelhouse
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0 and six_in(tmp_path) == "1.16.0", output[-3000:]
    assert "changed:" in task_output(output, "Fill the wheelhouse"), output[-3000:]
    assert wheel.read_bytes() == whole
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0 and "changed=0" in output, output[-3000:]


def _with_wheel_build(tmp: Path, build: str) -> dict:
    """The env with one wheel file given by path and sha256 (as a kt_python_env_wheels override gives the
    legacy ktransformers wheel) and no other package: `build` marks which build of ktwheelprobe 1.0 it is."""
    from test_image_validate import _wheel

    where = tmp / f"build-{build}"
    where.mkdir()
    files = {"ktwheelprobe/__init__.py": f"BUILD = {build!r}\n".encode()}
    path = _wheel(where, "ktwheelprobe", files, version="1.0")
    wheel = {"name": "ktwheelprobe", "file": path.name, "path": str(path)}
    wheel["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    extra = _setup(tmp, "six")
    spec_wheel = {**wheel, "version": "1.0", "wheelhouse_file": path.name}  # as ktinfra's env_spec gives it
    extra["kt_python_env_spec"].update(packages=[], wheels=[spec_wheel])
    profile = yaml.safe_load((tmp / "profile.yaml").read_text())
    profile["envs"]["inference"].update(packages=[], wheels=[wheel])
    (tmp / "profile.yaml").write_text(yaml.safe_dump(profile))
    return extra


@pytest.mark.slow
def test_another_build_of_the_same_wheel_version_is_installed(tmp_path):
    """A wheel file replaced by another build of the same version (an AVX2 build by the AMX one, say):
    name==version was satisfied by the old build, so nothing reinstalled it and the env ran the old one."""
    build = [tmp_path / "env" / "bin" / "python", "-c", "import ktwheelprobe; print(ktwheelprobe.BUILD)"]
    rc, output = run_play(tmp_path, ENV, _with_wheel_build(tmp_path, "avx2"))
    assert rc == 0, output[-3000:]
    assert subprocess.check_output(build, text=True).strip() == "avx2"
    amx = _with_wheel_build(tmp_path, "amx")
    rc, output = run_play(tmp_path, ENV, amx)
    assert rc == 0, output[-3000:]
    assert subprocess.check_output(build, text=True).strip() == "amx"
    rc, output = run_play(tmp_path, ENV, amx)  # the same build again: nothing is due
    assert rc == 0 and task_output(output, "Install the wheel files") == "", output[-3000:]
