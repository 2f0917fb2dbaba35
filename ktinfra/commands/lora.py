"""`ktinfra lora serve|check`: serve a LoRA training output through SGLang, then chat through it."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ktinfra import lora

lora_app = typer.Typer(help="LoRA serving pipeline: convert adapters, render the serve command, chat check.")


def _fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _load_plan(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        plan = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        _fail(f"cannot read plan {path}: {exc}")
    if not isinstance(plan.get("serve"), dict):
        _fail(f"{path} has no `serve` section; produce it with `ktinfra plan --mode serve --json`")
    return plan


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _start_unit(unit_path: Path) -> None:
    if shutil.which("systemctl") is None:
        _fail("--start needs systemd (systemctl not found); start the command yourself")
    target = Path("/etc/systemd/system") / unit_path.name
    if unit_path.resolve() != target:
        shutil.copyfile(unit_path, target)
    for cmd in (["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", unit_path.name]):
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            _fail(f"{shlex.join(cmd)} failed: {proc.stderr.strip()}")


@lora_app.command("serve")
def serve(
    base: Annotated[str, typer.Option("--base", help="Base model path the adapters were trained on.")],
    adapter: Annotated[list[str], typer.Option("--adapter", help="NAME=TRAIN_OUTPUT_DIR (repeatable).")],
    legacy: bool = typer.Option(False, "--legacy", help="Legacy 0.4.x stack: sglang fork's convert_lora.py."),
    converter: Annotated[Path | None, typer.Option("--converter", help="Converter script path.")] = None,
    converter_python: str = typer.Option("python3", "--converter-python", help="Python with torch."),
    output_dir: Annotated[
        Path | None, typer.Option("--output-dir", help="Converted adapters go here.")
    ] = None,
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing converted adapters."),
    lora_alpha: float | None = typer.Option(None, "--lora-alpha", help="Alpha if the output has none."),
    plan: Annotated[Path | None, typer.Option("--plan", help="`ktinfra plan --json` output.")] = None,
    served_model_name: str | None = typer.Option(None, "--served-model-name", help="Name clients request."),
    host: str | None = typer.Option(None, "--host"),
    port: int | None = typer.Option(None, "--port", min=1, max=65535),
    max_loras_per_batch: int = typer.Option(1, "--max-loras-per-batch", min=1),
    lora_backend: str = typer.Option("triton", "--lora-backend", help="triton|csgmv|torch_native|ascend"),
    server_python: str = typer.Option("python3", "--server-python", help="Python of the sglang-kt env."),
    plan_out: Annotated[Path | None, typer.Option("--plan-out", help="Write the plan with LoRA on.")] = None,
    unit_out: Annotated[Path | None, typer.Option("--unit-out", help="Write a systemd unit file.")] = None,
    start: bool = typer.Option(False, "--start", help="Install and start the unit with systemctl."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and show; convert and write nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print machine JSON on stdout."),
) -> None:
    """Validate training outputs, convert them for SGLang, render the LoRA serve command (and unit)."""
    if start and unit_out is None:
        _fail("--start needs --unit-out", 2)
    try:
        specs = [lora.parse_adapter_spec(s) for s in adapter]
        names = [n for n, _ in specs]
        if len(set(names)) != len(names):
            raise lora.LoraError(f"adapter names must be unique: {names}")
        adapters = [lora.inspect_adapter(n, p, base) for n, p in specs]
        converting = [a for a in adapters if lora.needs_conversion(a, legacy)]
        script = lora.find_converter(legacy, converter) if converting else None
        steps, served = [], {}
        for a in adapters:
            if a not in converting:
                served[a.name] = a.path
                continue
            out = (output_dir / a.name) if output_dir else lora.default_output(a, legacy)
            if out.exists() and not overwrite:
                raise lora.LoraError(f"{out} already exists; pass --overwrite to replace it")

            def cmd_for(target: Path, a=a) -> list[str]:
                return lora.conversion_command(a, target, base, legacy, script, converter_python, lora_alpha)

            cmd_for(out)  # validates arguments (e.g. missing alpha) before anything runs
            steps.append((a, out, cmd_for))
            served[a.name] = out
        plan_doc = _load_plan(plan)
        serve_section = dict(plan_doc.get("serve") or {})
        for key, value in (("served_model_name", served_model_name), ("host", host), ("port", port)):
            if value is not None:
                serve_section[key] = value
        serve_section = lora.lora_plan(serve_section, served, max_loras_per_batch, lora_backend)
        cmd = lora.serve_command(serve_section, base, server_python)
        conversions = []
        for a, out, cmd_for in steps:
            conversions.append({"adapter": a.name, "output": str(out), "command": cmd_for(out)})
            if not dry_run:
                lora.convert(a, out, cmd_for, overwrite=overwrite)
    except lora.LoraError as exc:
        _fail(str(exc))

    if not dry_run:
        if plan_out is not None:
            _write_atomic(plan_out, json.dumps({**plan_doc, "serve": serve_section}, indent=2) + "\n")
        if unit_out is not None:
            _write_atomic(unit_out, lora.systemd_unit(cmd, f"KTransformers SGLang server with LoRA ({base})"))
        if start:
            _start_unit(unit_out)
    result = {
        "adapters": [a.as_dict() for a in adapters],
        "conversions": conversions,
        "serve": serve_section,
        "command": cmd,
        "dry_run": dry_run,
        "started": start and not dry_run,
    }
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    console = Console()
    for a in adapters:
        console.print(
            f"adapter [bold]{a.name}[/bold]: {a.kind}, r={a.rank}, alpha={a.alpha}, {a.tensors} tensors"
        )
        for warning in a.warnings:
            console.print(f"  [yellow]warning:[/yellow] {warning}")
    for c in conversions:
        verb = "would convert" if dry_run else "converted"
        console.print(f"{verb} {c['adapter']} -> {c['output']}")
    console.print("serve command:")
    console.print(shlex.join(cmd), soft_wrap=True, markup=False)


@lora_app.command("check")
def check(
    url: str = typer.Option(..., "--url", help="Server or router base URL."),
    model: str = typer.Option(..., "--model", help="Served model name."),
    adapter: str | None = typer.Option(None, "--adapter", help="Adapter name (left side of --lora-paths)."),
    legacy: bool = typer.Option(False, "--legacy", help="Select the adapter with the lora_path field."),
    prompt: str = typer.Option("Say hello in one short sentence.", "--prompt"),
    max_tokens: int = typer.Option(32, "--max-tokens", min=1),
    timeout: float = typer.Option(120.0, "--timeout", min=1.0),
    as_json: bool = typer.Option(False, "--json", help="Print machine JSON on stdout."),
) -> None:
    """Send one chat request through the endpoint and check that a reply comes back."""
    result = lora.chat_check(url, model, adapter, legacy, prompt, max_tokens, timeout)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    elif result["ok"]:
        Console().print(f"[green]ok[/green] in {result['latency_s']} s: {result['reply']!r}")
    else:
        Console(stderr=True).print(f"[red]chat check failed[/red]: {result['error']}")
    if not result["ok"]:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(lora_app, name="lora")
