"""ktinfra installed without its ops extra (pip install -e . alone): doctor ran the suite anyway and ended in
'error: the suite did not run (pytest exit 1): ... No module named pytest' (or pytest's own error where only
pytest-testinfra was missing), without a word on what to install. Real `python -m ktinfra doctor` in a venv
that holds this venv's packages but the ones left out."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

SITE = Path(sysconfig.get_paths()["purelib"])


def _venv_without(tmp_path: Path, *prefixes: str) -> Path:
    """A venv whose site-packages links every entry of this one except those starting with `prefixes`."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    for entry in SITE.iterdir():
        if not entry.name.lower().startswith(prefixes):
            (site / entry.name).symlink_to(entry)
    return venv / "bin" / "python"


@pytest.mark.parametrize(
    ("left_out", "named"),
    [
        (("testinfra", "pytest_testinfra"), "pytest-testinfra not installed"),
        (("pytest", "_pytest", "testinfra"), "pytest and pytest-testinfra not installed"),
    ],
)
def test_missing_suite_tools_are_named_with_the_fix(tmp_path, left_out, named):
    python = _venv_without(tmp_path, *left_out)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(python), "-m", "ktinfra", "doctor", "--role", "any", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 1 and done.stdout == "", done
    said = done.stderr
    assert said.startswith("error: the KT host suite runs with pytest and pytest-testinfra; "), said
    assert named in said and f"for {python}: install them there" in said, said
    assert "pip install -e '.[ops]'" in said
