"""Every `ktinfra ...` command line in README.md and docs/readme/*.md names a command and options the CLI has.

A renamed or removed option (or subcommand) otherwise leaves the pages telling users to type something that
fails with typer's "No such option" box. Lines are taken from code blocks (`$ ` prompts and `\\` continuations
joined) and from inline code spans starting with `ktinfra `; `[...]` optional groups, `a|b` alternatives and
placeholders (`...`, `…`, `DIR`) are read as the docs mean them: every option named must exist on the command
the words before it select."""

import re
import shlex
from pathlib import Path

import pytest
import typer

from ktinfra.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "readme").glob("*.md"))]
SPAN = re.compile(r"`(ktinfra [^`]+)`")


def _doc_lines(path: Path) -> list[tuple[int, str]]:
    found, in_code, held = [], False, ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().startswith("```"):
            in_code, held = not in_code, ""
            continue
        if not in_code:
            found += [(number, m.group(1)) for m in SPAN.finditer(line)]
            continue
        text = line.strip().removeprefix("$ ")
        text = f"{held} {text}" if held else text
        if text.endswith("\\"):
            held = text[:-1]
            continue
        held = ""
        if text.startswith("ktinfra "):
            found.append((number, text))
    return found


def _words(line: str) -> list[str]:
    line = re.sub(r"\s#\s.*$", "", line)  # a trailing comment
    line = re.split(r"\s>\s", line)[0]  # `> plan.json`: the shell's, not ktinfra's
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    return [w.strip("[]") for w in words[1:] if w.strip("[]")]


def _alternatives(words: list[str]) -> list[list[str]]:
    """`a | b c | d` (standalone bars) is three command lines after the command path."""
    runs, current = [], []
    for word in words:
        if word == "|":
            runs.append(current)
            current = []
        else:
            current.append(word)
    return [*runs, current]


def _is_group(command) -> bool:
    """typer >= 0.20 vendors click, so no isinstance against the click package."""
    return hasattr(command, "commands")


def _options(command) -> set[str]:
    names = {"--help"}
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def _takes_value(command, name: str) -> bool:
    param = next(p for p in command.params if name in p.opts or name in p.secondary_opts)
    return not (getattr(param, "is_flag", False) or getattr(param, "count", False))


def _check(group, words: list[str], where: str, path: tuple[str, ...] = ("ktinfra",)) -> list[str]:
    """Problems of one line: the words select subcommands, then each `-x`/`--xx` word must be an option
    (the value after an option that takes one is its value, e.g. `--extra-arg --watchdog-timeout=600`)."""
    command, rest = group, list(words)
    while _is_group(command) and rest:
        runs = _alternatives(rest)
        if len(runs) > 1 and all(run and run[0] in command.commands for run in runs):
            # `profile list | show kt-0.7 | check ...`: each alternative is its own line
            return [problem for run in _alternatives(rest) for problem in _check(command, run, where, path)]
        if rest[0].startswith("-"):
            break
        names = rest[0].split("|")
        if not all(name in command.commands for name in names):
            if rest[0] in {"...", "…"} or rest[0].isupper():
                return []
            return [f"{where}: {' '.join(path)} has no command {rest[0]!r} (has {sorted(command.commands)})"]
        if len(names) > 1:  # `weights manifest|check DIR ...`: every alternative takes the rest
            return [problem for name in names for problem in _check(command, [name, *rest[1:]], where, path)]
        command, path, rest = command.commands[names[0]], (*path, names[0]), rest[1:]
    if _is_group(command):
        return []
    known, problems, value_next = _options(command), [], False
    for word in rest:
        if value_next:
            value_next = False
            continue
        for part in word.split("|"):
            if part.startswith("-") and part not in {"-", "--"}:
                name = part.split("=", 1)[0]
                if name not in known:
                    problems.append(f"{where}: {' '.join(path)} has no option {name} (has {sorted(known)})")
                elif name != "--help" and "=" not in part and _takes_value(command, name):
                    value_next = True
    return problems


def _all_lines() -> list[tuple[str, str]]:
    return [(f"{p.relative_to(ROOT)}:{n}", line) for p in PAGES for n, line in _doc_lines(p)]


def test_the_pages_hold_command_lines():
    """The extraction itself works: the README's CLI overview alone has a dozen lines."""
    readme = [where for where, _ in _all_lines() if where.startswith("README.md:")]
    assert len(readme) >= 12


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_ktinfra_line_names_real_commands_and_options(page):
    cli = typer.main.get_command(app)
    problems = []
    for number, line in _doc_lines(page):
        problems += _check(cli, _words(line), f"{page.relative_to(ROOT)}:{number}")
    assert problems == []


def test_the_check_catches_a_renamed_option_and_command():
    """The guard fails where the docs would be wrong (a flag the CLI lacks, a subcommand it lacks)."""
    cli = typer.main.get_command(app)
    assert _check(cli, _words("ktinfra plan --model X --gpu-count 2 [--json]"), "x") != []
    assert _check(cli, _words("ktinfra weights manifest|verify DIR --model-path M"), "x") != []
    assert _check(cli, _words("ktinfra profile list | show kt-0.7 | check kt-0.7 --bogus"), "x") != []
    assert _check(cli, _words("ktinfra bench --url U --model M --no-stream --capacity --min-tps 1"), "") == []
    assert _check(cli, _words("ktinfra plan --model M [--from DIR|--facts F] --json > p.json"), "") == []
