"""`ktinfra provision` without --json: the artifacts path people copy from the last line.

rich read a `[...]` in the path as markup and dropped it (`runs[old]` printed as `runs`), and wrapped the line
at the console's width (80 columns where stdout is no terminal), cutting a long path over lines. The path is
now printed as it is, on one line; a playbook path with brackets keeps them in the table's title too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from ktinfra.cli import app

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Say something
      ansible.builtin.debug: {msg: hi}
"""


def test_the_artifacts_path_is_printed_whole(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "play[v2].yml").write_text(PLAY)
    python = shutil.which("python3")
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={python}\n"
    )
    monkeypatch.chdir(tmp_path)
    artifacts = tmp_path / ("runs[old]-" + "x" * 60)
    args = ["provision", "play[v2].yml", "-i", "hosts", "--artifacts", str(artifacts)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    run_dir = next((artifacts / "artifacts").iterdir())
    last = result.stdout.rstrip("\n").splitlines()[-1]
    assert last.startswith(f"artifacts: {run_dir}  ("), result.stdout
    assert "[v2]" in result.stdout
    # the same run as --json names the same folder
    again = CliRunner().invoke(app, [*args, "--json"])
    assert Path(json.loads(again.stdout)["artifacts"]).parent == run_dir.parent
