"""A .gguf file in --weight-path that cannot be read (no read permission for the user planning): the error
names that file. Before, it said only "--weight-path DIR: Permission denied", of a directory that can be
read. Run as a user without the permission: root reads any file, so as root the CLI runs as nobody."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import gguf_fixture as fixture

REPO = Path(__file__).resolve().parents[2]
NO_AMX = REPO / "tests" / "fixtures" / "facts" / "xeon8352v-4090-noamx.json"


def test_an_unreadable_gguf_file_is_named():
    folder = Path(tempfile.mkdtemp(prefix="ktinfra-unreadable-"))  # /tmp: nobody can reach it
    try:
        folder.chmod(0o755)
        fixture.qwen3_30b(folder, "Q8_0")
        unreadable = folder / "Qwen3-30B-A3B-Q8_0.gguf"
        unreadable.chmod(0o200 if os.geteuid() else 0o600)  # as root: root's own, nobody cannot read it
        run_as = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        args = ["plan", "--model", "Qwen3-30B-A3B", "--facts", str(NO_AMX), "--weight-path", str(folder)]
        code = "import sys; from ktinfra.cli import app; sys.argv[0] = 'ktinfra'; app()"
        res = subprocess.run(
            [*run_as, sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "HOME": str(folder)},
            cwd=folder,
            check=False,
        )
        assert res.returncode == 1, res.stdout + res.stderr
        assert f"--weight-path {folder}: {unreadable}: Permission denied" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr
    finally:
        shutil.rmtree(folder)


def test_a_weight_path_the_user_cannot_reach_is_no_traceback():
    """--weight-path under a folder the planning user may not search (it may be another host's path): taken
    as not there yet, as before d7d9113, whose is-it-a-file check let PermissionError out of Path.exists()."""
    folder = Path(tempfile.mkdtemp(prefix="ktinfra-unsearchable-"))  # mode 0700: nobody cannot enter it
    try:
        if os.geteuid():
            folder.chmod(0o000)
        run_as = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        args = ["plan", "--model", "Qwen3-30B-A3B", "--facts", str(NO_AMX), "--json"]
        args += ["--weight-path", str(folder / "Q4_K_M"), "--cpu-format", "GGUF:Q4_K_M"]
        code = "import sys; from ktinfra.cli import app; sys.argv[0] = 'ktinfra'; app()"
        res = subprocess.run(
            [*run_as, sys.executable, "-c", code, *args], capture_output=True, text=True, cwd="/", check=False
        )
        assert "Traceback" not in res.stderr, res.stderr
        assert res.returncode == 0, res.stderr
    finally:
        folder.chmod(0o700)
        shutil.rmtree(folder)
