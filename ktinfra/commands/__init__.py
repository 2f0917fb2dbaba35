"""One module per CLI command group; each exposes `register(app)`."""

from pathlib import Path

import typer


def non_empty_path(param: typer.CallbackParam, value: str | None) -> Path | None:
    """typer callback of a path option: "" would become "." (the current directory) without a word."""
    if value is not None and not value.strip():
        typer.echo(f"error: {param.opts[0]} is empty", err=True)
        raise typer.Exit(1)
    return None if value is None else Path(value)
