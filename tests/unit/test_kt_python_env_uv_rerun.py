"""kt_python_env's uv install (tasks/uv.yml) run for real on localhost: uv's own venv under tmp_path, the
uv wheel downloaded into a wheelhouse there by the tool venv's pip (this checkout's .venv stands in)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from role_play import interrupt_play, run_play

UV = [{"ansible.builtin.include_role": {"name": "kt_python_env", "tasks_from": "uv"}}]


def test_a_uv_venv_cut_off_while_it_was_created_is_created_again(tmp_path):
    """Ctrl-C while the uv venv was created left bin/python without pip. Before: `[ -x bin/python ]` kept
    that venv, and every re-run failed installing uv into it (No module named pip)."""
    (tmp_path / "wh").mkdir()
    extra = {
        "kt_preflight_ktinfra_exe": str(Path(sys.executable).parent / "ktinfra"),  # its python runs pip
        "kt_python_env_uv_dir": str(tmp_path / "uv"),
        "kt_python_env_install": {
            "wheelhouse": str(tmp_path / "wh"),
            "pip": {"index_url": "", "extra_index_urls": []},
        },
    }
    python = tmp_path / "uv" / "bin" / "python"
    rc, output = interrupt_play(tmp_path, UV, extra, python)
    assert rc != 0 and python.exists() and not (tmp_path / "uv" / "bin" / "pip").exists(), output[-3000:]
    rc, output = run_play(tmp_path, UV, extra)
    assert rc == 0, output[-3000:]
    version = subprocess.run([tmp_path / "uv" / "bin" / "uv", "--version"], capture_output=True, text=True)
    assert version.stdout.startswith("uv 0.13.8"), version
    rc, output = run_play(tmp_path, UV, extra)
    assert rc == 0 and "changed=0" in output, output[-3000:]
