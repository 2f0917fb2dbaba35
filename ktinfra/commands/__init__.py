"""One module per CLI command group; each exposes `register(app)`."""

from pathlib import Path
from typing import Annotated

import typer


def non_empty_text(param: typer.CallbackParam, value: str | None) -> str | None:
    """typer callback of a text option: "" (an unset variable) is refused instead of meaning the default,
    the current directory, every task or every host."""
    if value is not None and not value.strip():
        typer.echo(f"error: {_shown(param)} is empty", err=True)
        raise typer.Exit(1)
    return value


def _shown(param: typer.CallbackParam) -> str:
    return max(param.opts, key=len) if param.param_type_name == "option" else param.name.upper()


def _home(param: typer.CallbackParam, value: str) -> str:
    """A leading ~ or ~user, which the shell leaves as it is after `--out=` or in quotes: a literal ./~
    folder is never what was meant. A ~user with no such user (or ~ with no home to be found) is refused
    in one line instead of the RuntimeError that Path.expanduser raises."""
    if not value.startswith("~"):
        return value
    try:
        return str(Path(value).expanduser())
    except RuntimeError:
        user = value[1:].split("/", 1)[0]
        what = f"user {user!r} does not exist" if user else "the home directory is not known"
        typer.echo(
            f"error: {_shown(param)} {value!r}: cannot expand {value.split('/', 1)[0]}: {what}", err=True
        )
        raise typer.Exit(1) from None


def non_empty_path(param: typer.CallbackParam, value: str | None) -> Path | None:
    """typer callback of a path option: "" would become "." (the current directory) without a word."""
    return None if non_empty_text(param, value) is None else Path(_home(param, value))


def absolute_path(param: typer.CallbackParam, value: str | None) -> Path | None:
    """typer callback of a path option that names a place on the host (an env root, a wheelhouse): a
    relative path would be taken from wherever the command happens to run."""
    if non_empty_text(param, value) is None:
        return None
    value = _home(param, value)
    if not value.startswith("/"):
        typer.echo(f"error: {max(param.opts, key=len)} must be an absolute path, got {value!r}", err=True)
        raise typer.Exit(1)
    return Path(value)


# --api-key-file of the commands that talk to a running server (bench, lora check)
BearerKeyFileOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key-file",
        callback=non_empty_path,
        help="File holding the server's API key (sent as Bearer).",
    ),
]
