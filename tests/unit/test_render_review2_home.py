"""A ~user path whose user does not exist (or a ~ with no home) is refused in one line, exit 1, for every
option and argument that takes its path through ktinfra.commands' callbacks; before, Path.expanduser's
RuntimeError came out as a traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.commands import absolute_path, non_empty_path

MISSING = "~ktinfra-no-such-user-x9/f.json"


def _path_params():
    def walk(c, path):
        if hasattr(c, "commands"):
            for name, sub in c.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, c

    for path, c in walk(typer.main.get_command(app), []):
        for p in c.params:
            if getattr(p.callback, "__wrapped__", None) in (non_empty_path, absolute_path):
                yield path, p


PARAMS = list(_path_params())


def test_the_walk_finds_the_path_options():
    names = {(" ".join(path), p.name) for path, p in PARAMS}
    assert ("render serve", "facts") in names
    assert ("render train", "out") in names
    assert any(p.param_type_name == "argument" for _, p in PARAMS)
    assert len(PARAMS) > 20


@pytest.mark.parametrize(("path", "param"), PARAMS, ids=[f"{' '.join(a)}:{p.name}" for a, p in PARAMS])
def test_unknown_user_is_one_line(path, param):
    arg = [max(param.opts, key=len), MISSING] if param.param_type_name == "option" else [MISSING]
    result = CliRunner().invoke(app, [*path, *arg])
    assert result.exit_code == 1, (result.output, result.exception)
    assert not isinstance(result.exception, RuntimeError)
    assert "cannot expand ~ktinfra-no-such-user-x9: user 'ktinfra-no-such-user-x9' does not exist" in (
        result.output
    )
    assert "Traceback" not in result.output


def test_real_subprocess_render_serve_facts(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ktinfra",
            "render",
            "serve",
            "--facts",
            MISSING,
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        f"error: --facts '{MISSING}': cannot expand ~ktinfra-no-such-user-x9: "
        "user 'ktinfra-no-such-user-x9' does not exist"
    ]
    assert not (tmp_path / "o").exists()


def test_known_home_still_expands(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "ktinfra", "render", "serve", "--facts", "~/ktinfra-absent-x9.json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path), "COLUMNS": "200"},
    )
    assert "Traceback" not in r.stderr
    assert str(tmp_path / "ktinfra-absent-x9.json") in r.stderr or "--name" in r.stderr


def test_api_key_file_expands_home_like_the_other_paths(tmp_path):
    """--api-key-file=~/key (the shell leaves ~ after '=') read the literal ./~/key: 'cannot read
    --api-key-file ~/key: No such file or directory' although the file was there; '' read '.' (a directory).
    It now goes through the same callback as --plan/--facts/--out."""
    (tmp_path / "key").write_text("s3cret-key\n")
    (tmp_path / "key").chmod(0o600)
    plan = Path(__file__).resolve().parents[1] / "fixtures" / "plans" / "h100-qwen3-30b-a3b-serve.json"
    base = [sys.executable, "-m", "ktinfra", "render", "serve", "--name", "q", "--plan", str(plan)]
    base += ["--model-path", "/m/Q", "--weight-path", "/w/Q", "--host", "0.0.0.0"]
    env = {**os.environ, "HOME": str(tmp_path), "COLUMNS": "200"}
    r = subprocess.run(
        [*base, "--out", str(tmp_path / "o"), "--api-key-file=~/key"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    assert 'KT_API_KEY="s3cret-key"' in (tmp_path / "o" / "ktinfra-serve-q.env").read_text()
    r = subprocess.run(
        [*base, "--out", str(tmp_path / "e"), "--api-key-file="], capture_output=True, text=True, env=env
    )
    assert (r.returncode, r.stderr.strip()) == (1, "error: --api-key-file is empty")
    assert not (tmp_path / "e").exists()
