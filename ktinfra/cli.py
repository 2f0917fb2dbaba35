"""The `ktinfra` command line: every command module registers itself here."""

from __future__ import annotations

import importlib
import pkgutil

import typer
from typer.core import TyperGroup

from ktinfra import __version__
from ktinfra import commands as _commands

# click's UsageError, whether typer vendors click (>= 0.20) or imports it.
_UsageError = next(cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "UsageError")


class _UsageErrorExitsOne(TyperGroup):
    """Command-line mistakes exit 1 like every other bad input: 2 stays "not feasible / problems found"."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except _UsageError as error:
            error.exit_code = 1
            raise

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except _UsageError as error:
            error.exit_code = 1
            raise


app = typer.Typer(
    cls=_UsageErrorExitsOne,
    name="ktinfra",
    help="Detect, plan, render, provision, benchmark and diagnose KTransformers hosts.",
    no_args_is_help=True,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ktinfra {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """ktinfra: infrastructure-as-code for KTransformers (SGLang + kt-kernel, LLaMA-Factory + KT)."""


def _register_all() -> None:
    for mod in sorted(pkgutil.iter_modules(_commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{_commands.__name__}.{mod.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_all()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
