"""`ktinfra profile check --wheels-json @FILE` and `--wheels-json -` (stdin): a wheel override's URL may carry
a token (user:token@, ?token=), and an argument is seen in ps and in what Ansible prints at -vvv, so the
overrides can come from a file or stdin; the JSON given as the argument still works."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app

runner = CliRunner()
URL = "https://ci:t0ken@files.example/ktransformers-0.4.2-cp311-cp311-linux_x86_64.whl?token=t0ken"
OVERRIDES = {"ktransformers": {"url": URL, "sha256": "ab" * 32}}


def _check(tmp: Path, value: str, stdin: str | None = None):
    argv = ["profile", "check", "kt-0.4-autodl", "--env", "sft", "--root", str(tmp / "envs")]
    argv += ["--wheelhouse", str(tmp / "wh"), "--manager", "venv", "--json", "--wheels-json", value]
    return runner.invoke(app, argv, input=stdin)


def _url(result) -> str:
    assert result.exit_code in (0, 2), result.output
    (env,) = json.loads(result.stdout)["envs"]
    return next(w["url"] for w in env["wheels"] if w["name"] == "ktransformers")


@pytest.mark.parametrize("how", ["argument", "file", "stdin"])
def test_the_overrides_come_from_the_argument_a_file_or_stdin(tmp_path, how):
    text = json.dumps(OVERRIDES)
    if how == "file":
        given = tmp_path / "wheels.json"
        given.write_text(text)
        given.chmod(0o600)
        result = _check(tmp_path, f"@{given}")
    else:
        result = _check(tmp_path, text if how == "argument" else "-", stdin=text if how == "stdin" else None)
    assert _url(result) == URL


@pytest.mark.parametrize(
    ("name", "message"),
    [("missing.json", "is not a file"), ("a-folder", "is not a file"), ("fifo", "is not a file")],
)
def test_a_file_that_cannot_be_read_is_one_error(tmp_path, name, message):
    (tmp_path / "a-folder").mkdir()
    os.mkfifo(tmp_path / "fifo")  # read, it would wait for ever
    result = _check(tmp_path, f"@{tmp_path / name}")
    assert result.exit_code == 1, result.output
    assert result.output.strip() == f"error: --wheels-json @{tmp_path / name}: {tmp_path / name} {message}"


def test_bad_json_in_the_file_is_refused_as_the_argument_is(tmp_path):
    given = tmp_path / "wheels.json"
    given.write_text("{not json")
    result = _check(tmp_path, f"@{given}")
    assert result.exit_code == 1 and "wheel overrides are not valid JSON" in result.output, result.output
