"""`ktinfra provision PLAYBOOK -i INVENTORY`: run a playbook with a live view and a per-host summary."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ktinfra.commands import non_empty_path, non_empty_text
from ktinfra.provision import (
    COUNTERS,
    DEFAULT_ARTIFACTS,
    ProvisionError,
    ProvisionRequest,
    RunState,
    exit_code,
    run_validated,
)


def _each(check):
    """A typer callback for a repeatable option: `check` (non_empty_path, non_empty_text) on every value."""

    def callback(param: typer.CallbackParam, values: list[str] | None) -> list | None:
        return None if values is None else [check(param, value) for value in values]

    return callback


STYLE = {"ok": "green", "changed": "yellow", "failed": "red", "unreachable": "red", "skipped": "cyan"}


def _host_table(hosts: dict, title: str) -> Table:
    table = Table(title=escape(title), title_justify="left")
    table.add_column("host")
    for name in COUNTERS:
        table.add_column(name, justify="right", style=STYLE.get(name, ""))
    for host, counts in sorted(hosts.items()):
        values = counts if isinstance(counts, dict) else vars(counts)
        table.add_row(escape(host), *(str(values[name]) for name in COUNTERS))
    return table


def _diff_text(diff: str) -> Text:
    text = Text()
    for line in diff.splitlines(keepends=True):
        style = "red" if line.startswith("-") else "green" if line.startswith("+") else ""
        text.append(line, style="cyan" if line.startswith("@@") else style)
    return text


def _live_view(state: RunState) -> Group:
    head = Text.assemble(("play ", "bold"), state.play or "-", ("  task ", "bold"), state.task or "-")
    return Group(head, _host_table(state.hosts, f"{state.events} events"))


def register(app: typer.Typer) -> None:
    @app.command()
    def provision(
        playbook: Annotated[
            str, typer.Argument(callback=non_empty_path, help="playbook, e.g. playbooks/serve.yml")
        ],
        # repeatable as ansible-playbook's: Ansible merges them (typer kept only the last one given)
        inventory: Annotated[
            list[str],
            typer.Option(
                "-i",
                "--inventory",
                metavar="PATH",
                callback=_each(non_empty_path),
                help="inventory file or directory, or host1,host2, (repeatable, as ansible-playbook -i)",
            ),
        ],
        limit: Annotated[
            str | None, typer.Option("--limit", "-l", callback=non_empty_text, help="ansible --limit pattern")
        ] = None,
        # ansible-runner drops an empty --tags, which ansible-playbook reads as "no task"; repeatable, as
        # ansible-playbook's (the values are joined with commas, as Ansible joins them)
        tags: Annotated[
            list[str] | None,
            typer.Option("--tags", "-t", callback=_each(non_empty_text), help="ansible --tags (repeatable)"),
        ] = None,
        skip_tags: Annotated[
            list[str] | None,
            typer.Option(
                "--skip-tags", callback=_each(non_empty_text), help="ansible --skip-tags (repeatable)"
            ),
        ] = None,
        extra_vars: Annotated[
            list[str] | None, typer.Option("-e", "--extra-vars", help="as ansible-playbook -e (repeatable)")
        ] = None,
        artifacts: Annotated[
            str,
            typer.Option(metavar="DIR", callback=non_empty_path, help="where ansible-runner keeps each run"),
        ] = str(DEFAULT_ARTIFACTS),
        check: Annotated[
            bool, typer.Option("--check", help="ansible --check: list what would change, change nothing")
        ] = False,
        diff: Annotated[bool, typer.Option("--diff", help="ansible --diff: show file differences")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="print the JSON report on stdout")] = False,
    ) -> None:
        """Run PLAYBOOK against INVENTORY through ansible-runner.

        Exit 1 if a host or Ansible failed, the inventory could not be parsed or no play matched a host.
        """
        err = Console(stderr=True)
        request = ProvisionRequest(
            playbook,
            inventory[0] if len(inventory) == 1 else list(inventory),
            limit,
            ",".join(tags) if tags else None,
            list(extra_vars or []),
            artifacts,
            check=check,
            diff=diff,
            skip_tags=",".join(skip_tags) if skip_tags else None,
        )
        try:
            request.validate()  # before the live view starts
            with Live(console=err, transient=True, refresh_per_second=4) as live:
                result = run_validated(request, on_event=lambda state: live.update(_live_view(state)))
        except ProvisionError as exc:
            typer.echo(f"error: {exc}", err=True)  # one plain line, never wrapped
            raise typer.Exit(1) from exc
        for message in result["errors"]:  # Ansible's own errors: a playbook, -e or --limit it refused
            typer.echo(f"error: {message}", err=True)
        if as_json:
            typer.echo(json.dumps(result, indent=2))
        else:
            out = Console()
            if result["hosts"] or not result["errors"]:
                out.print(_host_table(result["hosts"], f"{result['playbook']}: {result['status']}"))
            for change in result["changes"] if check else []:
                out.print(
                    f"[yellow]would change[/yellow] {escape(change['host'])} · {escape(change['task'])}"
                )
            for each in result["diffs"]:  # --diff: ansible-playbook's own rendering of each difference
                out.print(f"[bold]diff[/bold] {escape(each['host'])} · {escape(each['task'])}")
                out.print(_diff_text(each["diff"]))
            for failure in result["failures"]:
                where = f"{failure['host']} · {failure['task']}"
                out.print(
                    f"[red]{escape(failure['kind'])}[/red] {escape(where)}: {escape(str(failure['message']))}"
                )
            for recovered in result["recovered"]:  # not failures: the recap does not count them
                where = f"{recovered['host']} · {recovered['task']}"
                out.print(
                    f"[yellow]{escape(recovered['kind'])}[/yellow] {escape(where)}: "
                    f"{escape(str(recovered['message']))}"
                )
            # the path as it is (rich read a [x] in it as markup and dropped it) and on one line, to copy
            out.print(f"artifacts: {escape(result['artifacts'])}  ({result['seconds']} s)", soft_wrap=True)
        raise typer.Exit(exit_code(result))
