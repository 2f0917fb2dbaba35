"""Paths the profile commands read that are not regular files: a FIFO (reading one waits for a writer that
never comes), a device, a folder named like a wheel. Each is a clear problem or error, never a hang. Run
as real `ktinfra` subprocesses under a timeout, so a hang fails the test instead of stalling the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SHA = "a" * 64
WHEEL = "ktransformers-0.4.2+cu128torch27fancy-cp311-cp311-linux_x86_64.whl"


def _ktinfra(*args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [sys.executable, "-m", "ktinfra.cli", *args], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"ktinfra {' '.join(args)} hung (reading a FIFO?)")


def _check_wheel(tmp_path: Path, wheel_path: Path) -> dict:
    result = _ktinfra(
        "profile", "check", "kt-0.4-autodl", "--env", "sft", "--manager", "venv", "--json",
        "--root", str(tmp_path / "envs"), "--wheelhouse", str(tmp_path / "wh"),
        "--wheel", f"ktransformers={wheel_path}#sha256={SHA}",
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    return json.loads(result.stdout)


def test_a_fifo_named_like_the_wheel_is_a_problem_not_a_hang(tmp_path):
    fifo = tmp_path / WHEEL
    os.mkfifo(fifo)
    problems = _check_wheel(tmp_path, fifo)["problems"]
    assert f"wheel ktransformers: {fifo} is not a regular file (a FIFO or a device), not a wheel" in problems


def test_a_device_as_the_wheel_is_a_problem(tmp_path):
    device = tmp_path / WHEEL
    device.symlink_to("/dev/zero")  # the name must look like a wheel; /dev/zero would be read for ever
    problems = _check_wheel(tmp_path, device)["problems"]
    assert (
        f"wheel ktransformers: {device} is not a regular file (a FIFO or a device), not a wheel" in problems
    )


def test_a_folder_named_like_the_wheel_is_a_problem(tmp_path):
    folder = tmp_path / WHEEL
    folder.mkdir()
    problems = _check_wheel(tmp_path, folder)["problems"]
    assert f"wheel ktransformers: {folder} is not a file (the wheel itself, not its folder)" in problems


def test_a_fifo_as_an_envs_pyvenv_cfg_does_not_hang_the_check(tmp_path):
    env = tmp_path / "envs" / "kt-kernel"
    env.mkdir(parents=True)
    os.mkfifo(env / "pyvenv.cfg")
    result = _ktinfra(
        "profile", "check", "kt-0.7", "--env", "inference", "--manager", "venv", "--json",
        "--root", str(tmp_path / "envs"), "--wheelhouse", str(tmp_path / "wh"),
    )  # fmt: skip
    assert result.returncode in (0, 2), result.stderr
    assert json.loads(result.stdout)["envs"][0]["prefix"] == str(env)


def test_a_fifo_as_the_freeze_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "freeze.txt"
    os.mkfifo(fifo)
    result = _ktinfra("profile", "drift", "kt-0.7", "--env", "inference", "--freeze", str(fifo))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: --freeze {fifo}: not a regular file (a FIFO or a device), not a pip freeze"
    )
