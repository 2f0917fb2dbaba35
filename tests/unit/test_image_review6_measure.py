"""Review 6 of images/scripts/measure.sh (`make image-measure`): a failed build printed nothing (its output
went to out/measure/STEP.err and `set -e` ended the script silently), and the script began with
`rm -rf "$WHEELHOUSE"`, deleting whatever MEASURE_WHEELHOUSE named. The script runs from a copy of the
checkout in tmp_path with a stand-in ktinfra, so no image is built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "images" / "scripts" / "measure.sh"
KTINFRA_ERROR = "error: profile nowhere.yaml not found"


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "images" / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "images" / "scripts" / "measure.sh")
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    ktinfra = venv_bin / "ktinfra"
    ktinfra.write_text(f'#!/bin/sh\necho "$@" >>"{root}/ktinfra-calls"\necho "{KTINFRA_ERROR}" >&2\nexit 1\n')
    ktinfra.chmod(0o755)
    return root


def _measure(root: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(root / "images" / "scripts" / "measure.sh"), "nowhere.yaml"],
        capture_output=True,
        text=True,
        env=dict(os.environ, **env),
        timeout=60,
    )


def test_a_failed_build_says_so_on_the_terminal(tmp_path):
    root = _checkout(tmp_path)
    proc = _measure(root)
    assert proc.returncode == 1
    assert "the cold build failed (exit 1)" in proc.stderr
    assert KTINFRA_ERROR in proc.stderr


def test_a_wheelhouse_the_script_did_not_make_is_left_alone(tmp_path):
    root = _checkout(tmp_path)
    wheelhouse = tmp_path / "mine"
    wheelhouse.mkdir()
    (wheelhouse / "precious-1.0-py3-none-any.whl").write_text("x")
    proc = _measure(root, MEASURE_WHEELHOUSE=str(wheelhouse))
    assert (wheelhouse / "precious-1.0-py3-none-any.whl").exists()
    assert proc.returncode == 2 and "did not make it" in proc.stderr
    assert not (root / "ktinfra-calls").exists()  # refused before any build


def test_a_wheelhouse_the_script_made_is_emptied_for_the_next_cold_build(tmp_path):
    root = _checkout(tmp_path)
    wheelhouse = tmp_path / "new" / "wheels"
    _measure(root, MEASURE_WHEELHOUSE=str(wheelhouse))
    assert wheelhouse.is_dir()
    (wheelhouse / "torch-2.9.1-cp311-none-any.whl").write_text("x")  # the cold build downloaded it
    proc = _measure(root, MEASURE_WHEELHOUSE=str(wheelhouse))
    assert "the cold build failed" in proc.stderr  # got to the build
    assert list(wheelhouse.iterdir()) == []
