"""Every --api-key-file of the CLI takes its path through the shared callback: `--api-key-file=~/key` (the
shell leaves ~ after `=`) is the home's file, not ./~/key, and `--api-key-file=` is refused, not read as `.`.
render serve had it (e8e6eee); bench run, lora serve and lora check did not."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.commands import non_empty_path


def _api_key_options():
    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*path, name])
        for param in getattr(command, "params", []):
            if "--api-key-file" in getattr(param, "opts", []):
                yield " ".join(path), param

    return list(walk(typer.main.get_command(app), []))


def test_every_api_key_file_option_goes_through_the_path_callback():
    found = _api_key_options()
    assert {path for path, _ in found} >= {"render serve", "bench", "lora serve", "lora check"}
    assert all(getattr(p.callback, "__wrapped__", None) is non_empty_path for _, p in found), [
        path for path, p in found if getattr(p.callback, "__wrapped__", None) is not non_empty_path
    ]


def test_an_empty_api_key_file_is_refused_before_any_request(tmp_path):
    for command in (["bench"], ["lora", "check"]):
        args = [*command, "--url", "http://127.0.0.1:9", "--api-key-file="]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1, (command, result.output)
        assert "error: --api-key-file is empty" in result.output


def test_a_home_api_key_file_is_read_from_the_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path.parent)
    (tmp_path / "key").write_text("\n")  # empty: the error names the file that was read
    for command in (["bench", "--model", "m", "--users", "1"], ["lora", "check", "--model", "m"]):
        result = CliRunner().invoke(app, [*command, "--url", "http://127.0.0.1:9", "--api-key-file=~/key"])
        assert result.exit_code == 1, (command, result.output)
        assert f"--api-key-file {tmp_path / 'key'} is empty" in " ".join(result.output.split()), result.output
