"""`ktinfra provision -e @X` where X is no file: what the error line says, before anything runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app

PLAY = "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug:\n        msg: hello\n"
LOCAL = f"localhost ansible_connection=local ansible_python_interpreter={shutil.which('python3')}\n"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        # Before: "extra-vars file DIR does not exist" for a directory that exists (Ansible: "Is a directory")
        ("@{tmp}/vars.d", "extra-vars file {tmp}/vars.d is not a file"),
        ("@{tmp}/missing.yml", "extra-vars file {tmp}/missing.yml does not exist"),
        # Before: "extra-vars file  does not exist" (an empty name: Path("") is the current directory)
        ("@", "-e @ names no extra-vars file (-e @FILE)"),
    ],
    ids=["directory", "missing", "no-name"],
)
def test_an_extra_vars_file_that_is_no_file_is_named_so(tmp_path: Path, value: str, message: str) -> None:
    (tmp_path / "pb.yml").write_text(PLAY)
    (tmp_path / "hosts").write_text(LOCAL)
    (tmp_path / "vars.d").mkdir()
    args = ["provision", str(tmp_path / "pb.yml"), "-i", str(tmp_path / "hosts"), "--json",
            "--artifacts", str(tmp_path / "runs"), "-e", value.format(tmp=tmp_path)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and result.stdout == "", result.output
    assert result.stderr == f"error: {message.format(tmp=tmp_path)}\n"
    assert not (tmp_path / "runs").exists()  # ansible-runner never started


def test_a_failed_no_log_task_says_its_output_was_hidden(tmp_path: Path) -> None:
    """Before: the failure's message was empty ("failed localhost · Write the key: "); ansible-playbook says
    the output was hidden (no_log). The hidden output stays hidden."""
    play = (
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: Write the key\n"
        "      ansible.builtin.command: /bin/false s3cret-key\n      no_log: true\n"
    )
    (tmp_path / "pb.yml").write_text(play)
    (tmp_path / "hosts").write_text(LOCAL)
    args = ["provision", str(tmp_path / "pb.yml"), "-i", str(tmp_path / "hosts"), "--json",
            "--artifacts", str(tmp_path / "runs")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    [failure] = report["failures"]
    assert failure["task"] == "Write the key" and "no_log: true" in failure["message"], failure
    assert "s3cret-key" not in result.output
