"""kt_python_env's uv install (tasks/uv.yml) run for real on localhost: uv's own venv under tmp_path, the
uv wheel downloaded into a wheelhouse there by the tool venv's pip (this checkout's .venv stands in)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from role_play import interrupt_play, run_play, task_output

UV = [{"ansible.builtin.include_role": {"name": "kt_python_env", "tasks_from": "uv"}}]


def _uv_extra(tmp_path: Path, **more) -> dict:
    return {
        "kt_preflight_ktinfra_exe": str(Path(sys.executable).parent / "ktinfra"),  # its python runs pip
        "kt_python_env_uv_dir": str(tmp_path / "uv"),
        "kt_python_env_install": {
            "wheelhouse": str(tmp_path / "wh"),
            "pip": {"index_url": "", "extra_index_urls": []},
        },
    } | more


# slow: a cut-off run; uv.yml makes its venv with kt_common's tasks/venv.yml
# (test_kt_common_venv.py::test_no_role_outside_kt_common_makes_or_repairs_a_venv_by_hand), whose repair of a
# venv Ctrl-C left without pip runs in
# test_kt_common_venv.py::test_a_supervisord_venv_cut_off_by_ctrl_c_is_created_again
@pytest.mark.slow
def test_a_uv_venv_cut_off_while_it_was_created_is_created_again(tmp_path):
    """Ctrl-C while the uv venv was created left bin/python without pip. Before: `[ -x bin/python ]` kept
    that venv, and every re-run failed installing uv into it (No module named pip)."""
    (tmp_path / "wh").mkdir()
    extra = _uv_extra(tmp_path)
    python = tmp_path / "uv" / "bin" / "python"
    rc, output = interrupt_play(tmp_path, UV, extra, python)
    assert rc != 0 and python.exists() and not (tmp_path / "uv" / "bin" / "pip").exists(), output[-3000:]
    rc, output = run_play(tmp_path, UV, extra)
    assert rc == 0, output[-3000:]
    version = subprocess.run([tmp_path / "uv" / "bin" / "uv", "--version"], capture_output=True, text=True)
    assert version.stdout.startswith("uv 0.13.8"), version
    rc, output = run_play(tmp_path, UV, extra)
    assert rc == 0 and "changed=0" in output, output[-3000:]


def _truncate(wheel: Path) -> None:
    """What a pip download cut off while it copied the wheel into --dest leaves: the file, half of it."""
    data = wheel.read_bytes()
    wheel.write_bytes(data[: len(data) // 2])


# slow: the same zip check and removal in uv.yml as
# test_offline_a_truncated_uv_wheel_is_removed_and_the_envs_use_pip
@pytest.mark.slow
def test_a_truncated_uv_wheel_in_the_wheelhouse_is_downloaded_again(tmp_path):
    """Before: the wheel was found by its name, not downloaded again, and every run failed installing uv from
    it (zipfile.BadZipFile)."""
    (tmp_path / "wh").mkdir()
    extra = _uv_extra(tmp_path)
    rc, output = run_play(tmp_path, UV, extra)
    assert rc == 0, output[-3000:]
    (wheel,) = (tmp_path / "wh").glob("uv-*.whl")
    whole = wheel.read_bytes()
    subprocess.run(["rm", "-rf", tmp_path / "uv"], check=True)
    _truncate(wheel)
    rc, output = run_play(tmp_path, UV, extra)
    assert rc == 0, output[-3000:]
    assert "changed:" in task_output(output, "Remove a truncated uv wheel"), output[-3000:]
    assert wheel.read_bytes() == whole
    version = subprocess.run([tmp_path / "uv" / "bin" / "uv", "--version"], capture_output=True, text=True)
    assert version.stdout.startswith("uv 0.13.8"), version


def test_offline_a_truncated_uv_wheel_is_removed_and_the_envs_use_pip(tmp_path):
    (tmp_path / "wh").mkdir()
    rc, output = run_play(tmp_path, UV, _uv_extra(tmp_path))
    assert rc == 0, output[-3000:]
    (wheel,) = (tmp_path / "wh").glob("uv-*.whl")
    subprocess.run(["rm", "-rf", tmp_path / "uv"], check=True)
    _truncate(wheel)
    tasks = [*UV, {"ansible.builtin.debug": {"msg": "UV_READY={{ kt_python_env_uv_ready }}"}}]
    rc, output = run_play(tmp_path, tasks, _uv_extra(tmp_path, kt_python_env_offline=True))
    assert rc == 0, output[-3000:]
    assert "UV_READY=False" in output and "nor whole in the wheelhouse" in output, output[-3000:]
    assert not wheel.exists() and not (tmp_path / "uv" / "bin" / "uv").exists()
