import inspect
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import typer

from ktinfra import __version__
from ktinfra.cli import app


def test_console_entry_point_prints_version():
    out = subprocess.run(
        [sys.executable, "-m", "ktinfra", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == f"ktinfra {__version__}"


def test_no_arguments_shows_help_and_fails():
    proc = subprocess.run([sys.executable, "-m", "ktinfra"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "Usage" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--from", "x"],  # --model missing
        ["plan", "--model", "Qwen3-30B-A3B", "--port", "0"],
        ["plan", "--model", "Qwen3-30B-A3B", "--bogus"],
        ["no-such-command"],
        ["render", "serve", "--bogus"],
        ["profile", "show"],
        ["doctor", "--role", "bogus"],
    ],
)
def test_command_line_mistakes_exit_1_not_the_infeasible_2(args):
    """2 means "not feasible" (plan) or "problems found" (profile check/drift); a typo is not one."""
    proc = subprocess.run([sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_infeasible_plan_still_exits_2():
    facts = Path(__file__).parents[1] / "fixtures" / "facts" / "xeon8352v-4090-noamx.json"
    args = ["plan", "--model", "DeepSeek-V2-Lite", "--mode", "sft", "--facts", str(facts), "--json"]
    proc = subprocess.run([sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True)
    assert proc.returncode == 2 and json.loads(proc.stdout)["feasible"] is False


def test_human_output_keeps_brackets_in_data(tmp_path):
    """rich reads "[name]" as markup and drops it; names, paths and messages are data and print whole."""
    from ktinfra import catalog

    model = tmp_path / "Qwen3-30B-A3B[my-finetune]"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(catalog.entry_config("Qwen3-30B-A3B")))
    facts = Path(__file__).parents[1] / "fixtures" / "facts" / "h100-amx.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ktinfra", "plan", "--model", str(model), "--facts", str(facts)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "plan for Qwen3-30B-A3B[my-finetune]" in proc.stdout, proc.stdout + proc.stderr


def _commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    for name, command in group.commands.items():
        yield prefix + name, command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix}{name} ")


def test_every_command_summary_is_one_paragraph_of_one_line():
    # the command tables show a summary's line breaks as they are: "..., the" then a row of its own
    broken = [
        name
        for name, command in _commands(typer.main.get_command(app))
        if "\n" in inspect.cleandoc(command.help or "").split("\n\n")[0]
    ]
    assert broken == []
