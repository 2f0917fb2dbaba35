"""`ktinfra provision --artifacts DIR` where DIR exists but the run's own folder cannot be made in it.

ansible-runner made the run's folder (DIR/artifacts/<ident>/job_events): an OSError there (another user's
folder, a read-only mount, a path over PATH_MAX) came out as a Python traceback, exit 1, and left the
half-made run folder. It is now bad input, one `error:` line, before ansible-playbook starts, and nothing is
left. Shown with a real ENAMETOOLONG (permissions stop nothing where tests run as root): DIR/artifacts fits
in PATH_MAX, the run's job_events/ does not. A usable DIR still gets its run folder 0700, as ansible-runner
made it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from typer.testing import CliRunner

from ktinfra.cli import app

PATH_MAX = 4096
PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Say something
      ansible.builtin.debug: {msg: hi}
"""


def site(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "play.yml").write_text(PLAY)
    python = shutil.which("python3")
    local = f"localhost ansible_connection=local ansible_python_interpreter={python}\n"
    (tmp_path / "hosts").write_text(local)
    monkeypatch.chdir(tmp_path)


def long_dir(tmp_path: Path, length: int) -> Path:
    """A real directory whose absolute path is `length` characters long."""
    path = str(tmp_path / "long")
    while len(path) < length:
        path = os.path.join(path, "d" * min(200, max(length - len(path) - 1, 1)))
    os.makedirs(path)
    return Path(path)


def provision(artifacts: Path):
    args = ["provision", "play.yml", "-i", "hosts", "--artifacts", str(artifacts), "--json"]
    return CliRunner().invoke(app, args)


def test_a_run_folder_that_cannot_be_made_is_bad_input(tmp_path: Path, monkeypatch) -> None:
    site(tmp_path, monkeypatch)
    # DIR/artifacts/<ident> (28-30 characters) fits in PATH_MAX (with its NUL), its job_events/ does not
    artifacts = long_dir(tmp_path, PATH_MAX - 46)
    result = provision(artifacts)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"error: artifacts {artifacts}: cannot write in it (File name too long)")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert list((artifacts / "artifacts").iterdir()) == []  # no half-made run folder


def test_a_usable_artifacts_folder_gets_a_private_run_folder(tmp_path: Path, monkeypatch) -> None:
    site(tmp_path, monkeypatch)
    result = provision(tmp_path / "runs")
    assert result.exit_code == 0, result.stderr
    run_dir = Path(json.loads(result.stdout)["artifacts"])
    assert run_dir.parent == tmp_path / "runs" / "artifacts"
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert (run_dir / "stdout").is_file() and any((run_dir / "job_events").iterdir())
