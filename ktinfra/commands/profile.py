"""`ktinfra profile`: the stack profiles (versions are data) and the checks around installing them."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from ktinfra import envcheck, profiles
from ktinfra.commands import absolute_path, non_empty_path, non_empty_text

profile_app = typer.Typer(help="Stack profiles: list, show, check an install before it starts, check drift.")

EnvOption = Annotated[
    list[str], typer.Option("--env", help="Env key of the profile (inference, sft); repeatable.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine JSON on stdout.")]


def register(app: typer.Typer) -> None:
    app.add_typer(profile_app, name="profile")


def _load(name: str) -> dict:
    try:
        return profiles.load_profile(name)
    except profiles.UnknownProfileError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error


def _json(data: object) -> str:
    """Strict JSON (no NaN/Infinity); load_profile lets only JSON data through, this is the last guard."""
    try:
        return json.dumps(data, indent=2, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        typer.echo(f"error: the result cannot be written as JSON: {error}", err=True)
        raise typer.Exit(1) from error


def _finish(result: dict, as_json: bool, summary: list[str]) -> None:
    """JSON on stdout; else the problems on stderr, or (none) the `summary` lines on stdout."""
    if as_json:
        typer.echo(_json(result))
    else:
        for problem in result.get("problems", []):
            Console(stderr=True).print(f"[red]problem:[/] {escape(problem)}")
        if not result.get("problems"):
            for line in summary:
                typer.echo(line)
    if result.get("problems"):
        raise typer.Exit(2)


@profile_app.command("list")
def list_cmd(as_json: JsonOption = False) -> None:
    """Known stack profiles."""
    rows = [profiles.load_profile(name) for name in profiles.list_profiles()]
    if as_json:
        typer.echo(_json([{k: p.get(k) for k in ("name", "generation", "description")} for p in rows]))
        return
    table = Table("profile", "generation", "description")
    for p in rows:
        table.add_row(*(escape(str(p.get(k) or "")) for k in ("name", "generation", "description")))
    Console().print(table)


@profile_app.command("show")
def show_cmd(name: str, as_json: JsonOption = False) -> None:
    """One profile with every env resolved (pins, wheels, git sources, conda patches)."""
    data = _load(name)
    try:
        data["envs"] = {key: profiles.env_spec(data, key) for key in data.get("envs") or {}}
    except (ValueError, KeyError) as error:
        typer.echo(f"error: profile {name}: {error}", err=True)
        raise typer.Exit(1) from error
    if as_json:
        typer.echo(_json(data))
        return
    table = Table("env", "name", Column("packages / wheels / git", overflow="fold"))  # wheel names whole
    for key, env in data["envs"].items():
        items = env["packages"] + [w["file"] for w in env["wheels"]] + [g["repo"] for g in env["git"]]
        # data, not markup: `ktransformers[sft]==0.7.2` must keep its extra
        table.add_row(escape(str(key)), escape(env["name"]), escape("\n".join(items)))
    Console().print(table)


@profile_app.command("check")
def check_cmd(
    name: str,
    env: EnvOption,
    root: Annotated[
        str,
        typer.Option(
            callback=absolute_path, help="Where venvs are created, absolute (conda uses its own envs dir)."
        ),
    ],
    wheelhouse: Annotated[
        str, typer.Option(callback=absolute_path, help="Wheel cache on the data disk, absolute.")
    ],
    manager: Annotated[str, typer.Option(help="auto | conda | venv")] = "auto",
    conda_exe: Annotated[
        str | None,
        typer.Option(callback=non_empty_text, help="conda binary (default: PATH, miniconda paths)"),
    ] = None,
    wheel: Annotated[
        list[str] | None,
        typer.Option(help="Override a profile wheel: NAME=PATH_OR_URL#sha256=HEX; repeatable."),
    ] = None,
    wheels_json: Annotated[
        str | None,
        typer.Option(
            help='Overrides as JSON: {"NAME": {"path"|"url": ..., "sha256": ...}}; @FILE reads it from FILE, '
            "- from stdin (a URL may carry a token: an argument is seen in ps)."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Resolve where each env goes and list every problem before anything is installed (exit 2)."""
    data = _load(name)
    try:
        _refuse_twice("--env", env)
        pairs = [envcheck.parse_wheel_override(w) for w in wheel or []]
        _refuse_twice("--wheel", [wheel_name for wheel_name, _ in pairs])
        overrides = dict(pairs)
        from_json = envcheck.parse_wheels_json(_wheels_json_text(wheels_json))
        both = sorted(set(overrides) & set(from_json))
        if both:
            raise ValueError(f"wheel {both[0]} is overridden by both --wheel and --wheels-json")
        overrides.update(from_json)
        _check_sha256(overrides)
        result = envcheck.check_install(
            data,
            env,
            root=root,
            wheelhouse=wheelhouse,
            manager=manager,
            conda_exe=conda_exe,
            wheel_overrides=overrides,
        )
    except (ValueError, KeyError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    result["problems"] = _directory_problems(root=root, wheelhouse=wheelhouse) + result["problems"]
    summary = [
        f"{name} {env['key']}: no problems (prefix {env['prefix']}{_state(env)})" for env in result["envs"]
    ]
    _finish(result, as_json, summary)


def _wheels_json_text(value: str | None) -> str:
    """--wheels-json as given, or read from @FILE or - (stdin); JSON itself never starts with @ or is -."""
    if value is None:
        return "{}"
    if value == "-":
        return sys.stdin.read(envcheck.MAX_WHEELS_JSON_BYTES + 1)
    if not value.startswith("@"):
        return value
    path = Path(value[1:])
    if not path.is_file():  # a FIFO would wait for ever, a folder cannot be read
        raise ValueError(f"--wheels-json {value}: {path} is not a file")
    try:
        with path.open(encoding="utf-8") as file:
            return file.read(envcheck.MAX_WHEELS_JSON_BYTES + 1)
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"--wheels-json {value}: cannot read {path}: {error}") from None


def _state(env: dict) -> str:
    """What kt_python_env does with an env that exists: nothing, or install it again, and why."""
    if env.get("reinstall_due"):
        return ", reinstall due: " + "; ".join(reason["text"] for reason in env["reinstall_reasons"])
    return ", installed" if env["installed"] else ""


def _refuse_twice(flag: str, values: list[str]) -> None:
    """A repeated --env would count its disk twice; a repeated --wheel would keep only the last."""
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{flag} {value} given twice")
        seen.add(value)


def _check_sha256(overrides: dict[str, dict]) -> None:
    for wheel_name, override in overrides.items():
        digest = override.get("sha256")
        if digest is not None and not re.fullmatch(r"[0-9a-f]{64}", str(digest)):
            raise ValueError(f"wheel override {wheel_name}: sha256 must be 64 hex digits, got {digest!r}")


def _directory_problems(**paths: Path) -> list[str]:
    """--root/--wheelhouse must be (or be creatable as) directories: a file there, or above, is a problem."""
    problems = []
    for option, path in paths.items():
        existing = next((p for p in (path, *path.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            where = "" if existing == path else f" ({existing} is a file)"
            problems.append(f"--{option} {path} is not a directory{where}")
    return problems


@profile_app.command("drift")
def drift_cmd(
    name: str,
    env: Annotated[str, typer.Option("--env", help="Env key of the profile (inference, sft).")],
    freeze: Annotated[
        str, typer.Option(callback=non_empty_path, help="`pip freeze` output of the installed env.")
    ],
    as_json: JsonOption = False,
) -> None:
    """Compare an installed env (pip freeze) with the profile's pins and exclusions (exit 2 on drift)."""
    data = _load(name)
    try:
        spec = profiles.env_spec(data, env)
        if freeze.exists() and not freeze.is_file() and not freeze.is_dir():  # reading a FIFO waits for ever
            raise ValueError(f"--freeze {freeze}: not a regular file (a FIFO or a device), not a pip freeze")
        try:
            text = freeze.read_text(encoding="utf-8")
        except OSError as error:  # missing, a directory, unreadable
            raise ValueError(f"--freeze {freeze}: cannot be read ({error.strerror or error})") from None
        except UnicodeDecodeError as error:
            problem = f"not UTF-8 text (byte {error.start}), not a pip freeze"
            raise ValueError(f"--freeze {freeze}: {problem}") from None
        problems = profiles.freeze_drift(spec, text)
    except (OSError, ValueError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    pins = profiles.pins(spec)
    summary = [f"{name} {env}: no drift ({freeze} matches the profile's {len(pins)} pins)"]
    _finish({"profile": name, "env": spec["name"], "pins": pins, "problems": problems}, as_json, summary)
