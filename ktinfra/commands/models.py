"""`ktinfra models`: the model catalog and the sizing table computed from each architecture."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape


def _rows() -> list[dict]:
    from ktinfra import catalog, sizing

    return [{**arch.summary(), "sizing": sizing.table(arch)} for arch in catalog.list_models()]


MODEL_MIN_WIDTH = 12
CAPTION = "GPU memory, RAM and disk in GB (1e9 bytes)"


def _print_lines(console, rows: list[dict]) -> None:
    for row in rows:
        params = f"{row['total_params'] / 1e9:.0f}B, {row['num_experts']} x {row['num_layers']}L"
        console.print(f"[bold]{escape(row['name'])}[/bold] ({params})", soft_wrap=True)
        for use, est in row["sizing"].items():
            numbers = (
                f"GPU {est['vram_bytes'] / 1e9:.1f}, RAM {est['ram_bytes'] / 1e9:.0f}, "
                f"disk {est['disk_bytes'] / 1e9:.0f}"
            )
            console.print(f"  {use}: {numbers}", soft_wrap=True)
    console.print(CAPTION, soft_wrap=True)


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

        # Numbers never wrap; on a narrow terminal the model name folds instead, and where even that does not
        # fit (rich would crop whole columns), each estimate gets a line of its own.
        names = ("params", "experts", "use", "GPU", "RAM", "disk")
        cells = [
            [
                f"{row['total_params'] / 1e9:.0f}B",
                f"{row['num_experts']} x {row['num_layers']}L",
                use,
                f"{est['vram_bytes'] / 1e9:.1f}",
                f"{est['ram_bytes'] / 1e9:.0f}",
                f"{est['disk_bytes'] / 1e9:.0f}",
            ]
            for row in rows
            for use, est in row["sizing"].items()
        ]
        widths = [max(len(name), *(len(c[i]) for c in cells)) for i, name in enumerate(names)]
        console = Console()
        if MODEL_MIN_WIDTH + sum(widths) + 3 * (len(names) + 1) + 1 > console.width:
            _print_lines(console, rows)
            return
        table = Table(
            Column("model", overflow="fold", min_width=MODEL_MIN_WIDTH),
            *(Column(name, no_wrap=True) for name in names[:3]),
            *(Column(name, no_wrap=True, justify="right") for name in names[3:]),
            caption=CAPTION,
        )
        index = 0
        for row in rows:
            for n, _ in enumerate(row["sizing"]):
                first = n == 0
                params, experts, use, *numbers = cells[index]
                index += 1
                table.add_row(
                    escape(row["name"]) if first else "",
                    params if first else "",
                    experts if first else "",
                    use,
                    *numbers,
                )
        console.print(table)
