"""`ktinfra weights manifest|check`: the manifest kt-kernel wants beside converted INT8 expert weights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ktinfra import int8_weights
from ktinfra.commands import non_empty_path

weights_app = typer.Typer(
    help="Converted CPU expert weights: write or check the INT8 manifest kt-kernel trains from."
)

Root = Annotated[  # str: the callback makes the Path (typer's own Path would turn "" into ".")
    str,
    typer.Argument(
        metavar="DIR",
        help="convert_cpu_weights.py --no-merge-safetensor output (_layer_N/_numa_M/*.kt)",
        callback=non_empty_path,
    ),
]
ModelPath = Annotated[
    str,
    typer.Option(
        "--model-path",
        metavar="DIR",
        help="the model converted (its config.json gives the expert sizes)",
        callback=non_empty_path,
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="one JSON object on stdout")]


def _report(result: dict, as_json: bool, verb: str) -> None:
    if as_json:
        typer.echo(json.dumps(result))
    else:
        typer.echo(
            f"{verb} {result['manifest']}: {result['layers']} layers x {result['threadpool_count']} NUMA "
            f"pools, {result['files']} files, {result['bytes'] / 1e9:.2f} GB"
        )


def _run(action, root: Path, model_path: Path, as_json: bool, verb: str) -> None:
    try:
        result = action(root.absolute(), model_path)
    except int8_weights.WeightsError as exc:  # bad input: stderr only, --json or not (README's contract)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except OSError as exc:  # a file that cannot be read, a directory where the manifest cannot be written
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"error: {where}{exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None
    _report({"ok": True} | result, as_json, verb)


@weights_app.command("manifest")
def manifest(root: Root, model_path: ModelPath, as_json: AsJson = False) -> None:
    """Check a converted INT8 tree against the model and write its kt-weight-manifest.json, with the sha256 of
    every file (exit 1, nothing written, when a layer, file or size is off)."""
    _run(int8_weights.write_manifest, root, model_path, as_json, "wrote")


@weights_app.command("check")
def check(
    root: Root,
    model_path: ModelPath,
    as_json: AsJson = False,
    hashes: Annotated[
        bool,
        typer.Option(
            "--hashes",
            help="also compare every file's sha256 with the manifest, as kt-kernel's pretrained-artifact "
            "load does (reads the whole tree)",
        ),
    ] = False,
) -> None:
    """Check that the tree still matches its manifest as kt-kernel checks it; exit 1 when not."""

    def action(tree: Path, model: Path) -> dict:
        return int8_weights.check_manifest(tree, model, hashes=hashes)

    _run(action, root, model_path, as_json, "matches")


def register(app: typer.Typer) -> None:
    app.add_typer(weights_app, name="weights")
