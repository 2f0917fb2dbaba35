"""`ktinfra facts`: what this host (or a capture of one) really has."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ktinfra import facts as host_facts
from ktinfra.commands import non_empty_path


def register(app: typer.Typer) -> None:
    app.command("facts")(facts)


def facts(
    from_dir: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="DIR",
            callback=non_empty_path,
            help="Parse a capture folder instead of this host.",
        ),
    ] = None,
    capture: Annotated[
        str | None,
        typer.Option(
            "--capture",
            metavar="DIR",
            callback=non_empty_path,
            help="Write this host's capture into a new folder DIR.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine JSON (schema 1) on stdout.")] = False,
) -> None:
    """Detect CPU (usable cores, NUMA, AMX), memory, GPUs, OS, disks and container limits."""
    if from_dir is not None and capture is not None:
        raise typer.BadParameter("use either --from or --capture, not both")
    try:
        if capture is not None:
            written = host_facts.write_capture(capture)
            _print_capture(capture, written, as_json)
            return
        result = host_facts.from_capture(from_dir) if from_dir is not None else host_facts.gather_live()
    except (OSError, ValueError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        _print_tables(result)


def _print_capture(folder: Path, written: list[Path], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"capture": str(folder), "files": [p.name for p in written]}, indent=2))
        return
    _console().print(
        f"wrote {len(written)} files to [bold]{escape(str(folder))}[/]: {', '.join(p.name for p in written)}"
    )


def _console() -> Console:
    """rich's console on stdout, where a character the terminal's encoding lacks prints as "?": a capture
    keeps a stray byte as U+FFFD, which a zh_CN.GBK terminal cannot show, and the table failed with a
    UnicodeEncodeError traceback after `--json` and `--capture` had worked in that locale."""
    if isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.errors == "strict":
        sys.stdout.reconfigure(errors="replace")
    return Console()


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**30:.1f} GiB"


def _show(value: object) -> str:
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _print_tables(result: dict) -> None:
    console = _console()
    cpu, mem, osf = result["cpu"], result["memory"], result["os"]
    host = Table(title=escape(f"Host facts ({result['source']})"), show_header=False)
    host.add_column(style="bold")
    host.add_column()
    rows = [
        (
            "CPU",
            f"{_show(cpu['model'])} ({_show(cpu['vendor'])}, "
            f"family {_show(cpu['family'])} model {_show(cpu['model_id'])})",
        ),
        (
            "usable CPUs",
            f"{_show(cpu['usable_cpus'])}: {_show(cpu['logical_cpus'])} logical, "
            f"{_show(cpu['physical_cores'])} physical cores",
        ),
        ("physical cores from", _show(cpu["physical_cores_basis"])),
        ("CPU quota", "none" if cpu["quota_cpus"] is None else f"{cpu['quota_cpus']:g} CPUs"),
        (
            "NUMA",
            f"{_show(cpu['numa_nodes'])} node(s), {_show(cpu['cores_per_numa_node'])} cores each: "
            + ", ".join(f"node{n}={c}" for n, c in cpu["numa_node_cpus"].items()),
        ),
        ("threads/core, sockets", f"{_show(cpu['threads_per_core'])}, {_show(cpu['sockets'])}"),
        ("ISA", " ".join(k for k, v in cpu["isa"].items() if v) or "?"),
        (
            "memory",
            f"{_gib(mem['total_bytes'])} (MemTotal {_gib(mem['meminfo_total_bytes'])}, "
            f"cgroup limit {_gib(mem['cgroup_limit_bytes']) if mem['cgroup_limit_bytes'] else 'none'})",
        ),
        (
            "OS",
            f"{_show(osf['pretty_name'] or osf['id'])}, kernel {_show(osf['kernel'])}, "
            f"glibc {_show(osf['glibc'])} (from {_show(osf['glibc_source'])})",
        ),
        ("init / container", f"{_show(result['init'])} / {_show(result['container'])}"),
        ("container evidence", "; ".join(result["container_evidence"]) or "none"),
        ("/dev/shm", _gib(result["shm_bytes"])),
        ("tuning", ", ".join(f"{k}={_show(v)}" for k, v in result["tuning"].items())),
    ]
    for name, value in rows:
        host.add_row(name, escape(value))
    console.print(host)

    gpus = Table(title="GPUs")
    for column in ("index", "name", "memory", "compute cap", "NUMA", "links"):
        gpus.add_column(column)
    for gpu in result["gpus"]:
        links = ", ".join(f"{k}:{v}" for k, v in gpu["links"].items())
        memory = "?" if gpu["memory_mib"] is None else f"{gpu['memory_mib']} MiB"
        if gpu.get("mig"):  # memory_mib is then the largest instance's
            devices = gpu.get("mig_devices")
            count = {None: "instances unknown", 0: "no instance"}.get(
                None if devices is None else len(devices), f"{len(devices or [])} instance(s), the largest"
            )
            memory += f" (MIG: {count})"
        gpus.add_row(
            _show(gpu["index"]),
            escape(_show(gpu["name"])),
            memory,
            _show(gpu["compute_capability"]),
            _show(gpu["numa_affinity"]),
            escape(links),  # from the capture's topo file: "[/x]" there is text, not rich markup
        )
    console.print(gpus if result["gpus"] else "[yellow]no NVIDIA GPU found[/]")

    disks = Table(title="Filesystems")
    for column in ("mount", "type", "size", "available"):
        disks.add_column(column)
    for disk in result["disks"]:
        disks.add_row(
            escape(disk["mount"]),
            escape(str(disk["fstype"])),
            _gib(disk["size_bytes"]),
            _gib(disk["avail_bytes"]),
        )
    console.print(disks)
