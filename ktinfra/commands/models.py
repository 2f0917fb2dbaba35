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
NUMBERS = (("vram_bytes", 1), ("ram_bytes", 0), ("disk_bytes", 0))  # shown as GPU, RAM, disk


def _cells(row: dict) -> tuple[str, str, list[tuple[str, str, str, str]]]:
    """(params, experts, [(use, GPU, RAM, disk), ...]) of one catalog row, as both layouts show them."""
    estimates = [
        (
            use,
            f"{est['vram_bytes'] / 1e9:.1f}",
            f"{est['ram_bytes'] / 1e9:.0f}",
            f"{est['disk_bytes'] / 1e9:.0f}",
        )
        for use, est in row["sizing"].items()
    ]
    # routed experts x the layers holding them (DeepSeek-V3: 58 of its 61 layers; the first 3 are dense)
    return f"{row['total_params'] / 1e9:.0f}B", f"{row['num_experts']} x {row['num_moe_layers']}L", estimates


def _print_lines(console, rows: list[dict], cells: list[tuple]) -> None:
    for row, (params, experts, estimates) in zip(rows, cells, strict=True):
        console.print(f"[bold]{escape(row['name'])}[/bold] ({params}, {experts})", soft_wrap=True)
        for use, gpu, ram, disk in estimates:
            console.print(f"  {use}: GPU {gpu}, RAM {ram}, disk {disk}", soft_wrap=True)
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
        cells = [_cells(row) for row in rows]
        flat = [
            (params, experts, *estimate) for params, experts, estimates in cells for estimate in estimates
        ]
        widths = [max(len(name), *(len(line[i]) for line in flat)) for i, name in enumerate(names)]
        console = Console()
        if MODEL_MIN_WIDTH + sum(widths) + 3 * (len(names) + 1) + 1 > console.width:
            _print_lines(console, rows, cells)
            return
        table = Table(
            Column("model", overflow="fold", min_width=MODEL_MIN_WIDTH),
            *(Column(name, no_wrap=True) for name in names[:3]),
            *(Column(name, no_wrap=True, justify="right") for name in names[3:]),
            caption=CAPTION,
        )
        for row, (params, experts, estimates) in zip(rows, cells, strict=True):
            for n, estimate in enumerate(estimates):
                head = (escape(row["name"]), params, experts) if n == 0 else ("", "", "")
                table.add_row(*head, *estimate)
        console.print(table)
