"""One module per CLI command group; each exposes `register(app)`."""

from pathlib import Path

import typer


def non_empty_text(param: typer.CallbackParam, value: str | None) -> str | None:
    """typer callback of a text option: "" (an unset variable) is refused instead of meaning the default,
    the current directory, every task or every host."""
    if value is not None and not value.strip():
        shown = max(param.opts, key=len) if param.param_type_name == "option" else param.name.upper()
        typer.echo(f"error: {shown} is empty", err=True)
        raise typer.Exit(1)
    return value


def _home(value: str) -> str:
    """A leading ~ or ~user, which the shell leaves as it is after `--out=` or in quotes: a literal ./~
    folder is never what was meant."""
    return str(Path(value).expanduser()) if value.startswith("~") else value


def non_empty_path(param: typer.CallbackParam, value: str | None) -> Path | None:
    """typer callback of a path option: "" would become "." (the current directory) without a word."""
    return None if non_empty_text(param, value) is None else Path(_home(value))


def absolute_path(param: typer.CallbackParam, value: str | None) -> Path | None:
    """typer callback of a path option that names a place on the host (an env root, a wheelhouse): a
    relative path would be taken from wherever the command happens to run."""
    if non_empty_text(param, value) is None:
        return None
    value = _home(value)
    if not value.startswith("/"):
        typer.echo(f"error: {max(param.opts, key=len)} must be an absolute path, got {value!r}", err=True)
        raise typer.Exit(1)
    return Path(value)
