"""`ktinfra doctor`: is this host (or these hosts) really able to run KT? Exits 1 on any failed check."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ktinfra import doctor
from ktinfra.profiles import DEFAULT_PROFILE, UnknownProfileError

STYLE = {"passed": "green", "failed": "bold red", "error": "bold red", "skipped": "yellow"}


def _table(report: doctor.DoctorReport) -> Table:
    table = Table(title=f"KT host checks (role {report.role}, profile {report.profile})")
    for column in ("check", "host", "status", "detail"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        table.add_row(
            escape(check.id),
            escape(check.host),
            f"[{STYLE[check.status]}]{check.status}[/]",
            escape(_detail(check)),
        )
    return table


def _detail(check: doctor.Check) -> str:
    """The table's detail: the check's message, else the last line it printed."""
    lines = check.output.splitlines()
    return check.message or (lines[-1] if lines else "")


def _notes(report: doctor.DoctorReport) -> list[str]:
    """What the checks printed besides their detail: the units passed over (set to stopped, unit file
    removed, masked or not found), where a health URL came from. Only --json showed them."""
    notes = []
    for check in report.checks:
        shown = _detail(check).strip()
        lines = (line.strip() for line in check.output.splitlines())
        notes += [f"{check.id} ({check.host}): {line}" for line in lines if line and line != shown]
    return notes


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor_command(
        hosts: str = typer.Option("local://", "--hosts", help="testinfra host URLs, comma separated"),
        role: str = typer.Option("serve", "--role", help="serve | sft | any: what the host must do"),
        profile: str = typer.Option(DEFAULT_PROFILE, "--profile", help="stack profile the envs must match"),
        method: str = typer.Option(None, "--method", help="serve kt_method (AMX* methods need AMX)"),
        python: str = typer.Option(None, "--python", help="python of the inference env on the target"),
        sft_python: str = typer.Option(None, "--sft-python", help="python of the SFT env on the target"),
        health_url: str = typer.Option(None, "--health-url", help="serve health endpoint that must answer"),
        supervisor_dir: str = typer.Option(
            None, "--supervisor-dir", help="kt_serve_supervisor_dir, if not /etc/ktinfra/supervisor"
        ),
        select: str = typer.Option(None, "-k", help="pytest -k expression: run only matching checks"),
        as_json: bool = typer.Option(False, "--json", help="machine JSON on stdout"),
    ) -> None:
        """Run the KT host suite (tests/infra) and list every check; exit 1 if any failed or none passed."""
        options = {"method": method, "python": python, "sft_python": sft_python, "health_url": health_url,
                   "supervisor_dir": supervisor_dir}  # fmt: skip
        try:
            host_list = [h.strip() for h in hosts.split(",") if h.strip()]
            report = doctor.run(host_list, role, profile, select=select, **options)
            _show(report, as_json)
        except (doctor.DoctorError, UnknownProfileError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        except KeyboardInterrupt:  # typer's own exit 130 said nothing; the suite's temp dir is gone already
            typer.echo("error: interrupted: doctor stopped before its report was complete", err=True)
            raise typer.Exit(130) from None
        raise typer.Exit(0 if report.ok else 1)


def _show(report: doctor.DoctorReport, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    console = Console()
    console.print(_table(report))
    for note in _notes(report):
        console.print(note, style="dim", markup=False, highlight=False, soft_wrap=True)
    summary = report.to_dict()["summary"]
    console.print(", ".join(f"{n} {s}" for s, n in summary.items()))
    if not summary["passed"] and not summary["failed"] and not summary["error"]:
        console.print("[bold red]nothing was checked: no check passed[/]")
