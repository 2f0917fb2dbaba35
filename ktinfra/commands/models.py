"""`ktinfra models`: the model catalog and the sizing table computed from each architecture."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape


def _rows() -> list[dict]:
    from ktinfra import catalog, sizing

    return [{**arch.summary(), "sizing": sizing.table(arch)} for arch in catalog.list_models()]


def register(app: typer.Typer) -> None:
    @app.command("models")
    def models_command(
        as_json: Annotated[
            bool, typer.Option("--json", help="Print the catalog and sizing as JSON.")
        ] = False,
    ) -> None:
        """List the catalog with GPU memory / RAM / disk estimates per CPU weight format and for SFT."""
        rows = _rows()
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        from rich.console import Console
        from rich.table import Column, Table

        # Numbers never wrap; on a narrow terminal the model name folds instead.
        table = Table(
            Column("model", overflow="fold", min_width=12),
            *(Column(name, no_wrap=True) for name in ("params", "experts", "use")),
            *(Column(name, no_wrap=True, justify="right") for name in ("GPU", "RAM", "disk")),
            caption="GPU memory, RAM and disk in GB (1e9 bytes)",
        )
        for row in rows:
            first = True
            for use, est in row["sizing"].items():
                table.add_row(
                    escape(row["name"]) if first else "",
                    f"{row['total_params'] / 1e9:.0f}B" if first else "",
                    f"{row['num_experts']} x {row['num_layers']}L" if first else "",
                    use,
                    f"{est['vram_bytes'] / 1e9:.1f}",
                    f"{est['ram_bytes'] / 1e9:.0f}",
                    f"{est['disk_bytes'] / 1e9:.0f}",
                )
                first = False
        Console().print(table)
