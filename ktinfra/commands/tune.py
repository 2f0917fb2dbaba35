"""`ktinfra tune`: recommend SGLang flag changes from a server log."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ktinfra import tune
from ktinfra.commands import non_empty_path


def _table(columns: tuple[str, ...], rows: list[tuple]) -> Table:
    table = Table(show_lines=True)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*(escape(str(cell)) for cell in row))  # log lines hold [brackets]: not markup
    return table


def _show(result: dict, console: Console) -> None:
    summary = result["summary"]
    console.print(f"[bold]{escape(summary['message'])}[/bold]")
    console.print(
        f"decode batches {summary['decode_batches']}, prefill batches {summary['prefill_batches']}, "
        f"retractions {summary['retractions']}, OOM errors "
        + (", ".join(f"{phase} {n}" for phase, n in summary["oom_errors"].items() if n) or "none")
        + (
            f", no memory left for the KV pool at start {summary['no_kv_pool']}"
            if summary["no_kv_pool"]
            else ""
        )
    )
    if summary.get("running_req_max") is not None:
        peak, note = summary["running_req_max"], summary["running_req_max_note"]
        console.print(escape(f"peak #running-req {peak} ({note})"))
    first = lambda rec: rec["evidence"][0] if rec["evidence"] else ""  # noqa: E731
    if result["recommendations"]:
        columns = ("parameter", "current", "suggested", "reason", "evidence (first)")
        rows = [
            (r["parameter"], r["current"], r["suggested"], r["reason"], first(r))
            for r in result["recommendations"]
        ]
        console.print(_table(columns, rows))
    if result["advice"]:
        console.print("[bold]advice (no value to suggest)[/bold]")
        rows = [(r["parameter"], r["reason"], first(r)) for r in result["advice"]]
        console.print(_table(("parameter", "reason", "evidence (first)"), rows))
    if summary.get("observations"):
        console.print("[bold]observations (no change)[/bold]")
        rows = [(o["observation"], first(o)) for o in summary["observations"]]
        console.print(_table(("observation", "evidence (first)"), rows))


def tune_command(
    log: Annotated[
        str | None,
        typer.Option(
            "--log", callback=non_empty_path, help="SGLang server log: a file, a pipe, or - (standard input)."
        ),
    ] = None,
    unit: str | None = typer.Option(None, "--unit", help="systemd unit; reads `journalctl -u UNIT`."),
    as_json: bool = typer.Option(False, "--json", help="Print machine JSON on stdout."),
    ansible_vars: Annotated[
        str | None,
        typer.Option(
            "--ansible-vars",
            callback=non_empty_path,
            help="Also write the server-side recommendations as kt_serve role vars (YAML).",
        ),
    ] = None,
    gpu_memory_gb: float | None = typer.Option(
        None, "--gpu-memory-gb", min=1.0, help="GPU memory size; sharpens the --mem-fraction-static estimate."
    ),
) -> None:
    """Read an SGLang server log and recommend flag changes, each with its reason and evidence lines."""
    if (log is None) == (unit is None):
        raise typer.BadParameter("give exactly one of --log FILE or --unit NAME")
    from ktinfra.tune.advise import TuneInputError, check_gpu_memory

    try:
        check_gpu_memory(gpu_memory_gb)
        if ansible_vars is not None:
            tune.check_vars_path(ansible_vars)
            tune.check_not_the_log(ansible_vars, log)
            tune.existing_vars(ansible_vars)  # a file holding no vars is refused here, not replaced
        text = tune.read_log_file(log) if log is not None else tune.read_unit_log(unit)
        server_log = tune.parse_text(text)
        free = server_log.config.get("available_gpu_mem_gb")
        if gpu_memory_gb is not None and free is not None and gpu_memory_gb < free:
            raise TuneInputError(
                f"--gpu-memory-gb {gpu_memory_gb:g} is less than the {free:g} GB the log says were still "
                "free after loading: not this server's GPU"
            )
    except (tune.LogSourceError, TuneInputError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    result = tune.advise(server_log, gpu_memory_gb=gpu_memory_gb)
    if ansible_vars is not None:
        try:
            tune.write_vars(result, ansible_vars)
        except OSError as exc:
            typer.echo(f"error: cannot write --ansible-vars {ansible_vars}: {exc.strerror or exc}", err=True)
            raise typer.Exit(1) from exc
        except tune.LogSourceError as exc:  # the file changed into no vars file after the check
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
    if as_json:
        typer.echo(json.dumps(result, indent=2, default=str))
    else:
        _show(result, Console())
        if ansible_vars is not None:
            typer.echo(f"wrote {ansible_vars}")


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_command)
