"""`ktinfra lora serve|check`: serve a LoRA training output through SGLang, then chat through it."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ktinfra import lora
from ktinfra.render import RenderError, load_plan, render_serve, write_bundle
from ktinfra.render.serve import DEFAULT_SERVE_PYTHON, ENV_DIR

lora_app = typer.Typer(help="LoRA serving pipeline: convert adapters, render the serve command, chat check.")


def _fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _plan(
    plan_file: Path | None, model: str | None, facts: Path | None, from_dir: Path | None, stack: str | None
):
    """The serve plan from --plan, or from the planner for --model on --facts / --from / this host."""
    from ktinfra import planner

    if (plan_file is None) == (model is None):
        raise lora.LoraError("give either --plan FILE.json (from `ktinfra plan --json`) or --model NAME")
    if plan_file is not None:
        try:
            return load_plan(plan_file)
        except RenderError as exc:
            raise lora.LoraError(str(exc)) from exc
    if facts is not None and from_dir is not None:
        raise lora.LoraError("give either --facts or --from, not both")
    try:
        if facts is not None:
            host = planner.load_facts(facts)
        else:
            from ktinfra import facts as facts_mod

            host = facts_mod.from_capture(from_dir) if from_dir is not None else facts_mod.collect()
        return planner.plan(host, model, "serve", stack=stack)
    except planner.PlanInputError as exc:
        raise lora.LoraError(str(exc)) from exc


def _install_and_start(rendered, name: str) -> None:
    """Install the rendered unit template + env file and start the instance (needs root and systemd)."""
    if shutil.which("systemctl") is None:
        raise lora.LoraError("--start needs systemd (systemctl not found); use --out and start it yourself")
    unit_dir, env_dir = Path("/etc/systemd/system"), Path(ENV_DIR)
    env_dir.mkdir(parents=True, exist_ok=True)
    for file_name, (content, mode) in rendered.files.items():
        if not file_name.endswith((".service", ".env")):
            continue
        target = env_dir / f"{name}.env" if file_name.endswith(".env") else unit_dir / file_name
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(content)
        tmp.chmod(mode)
        tmp.replace(target)
    unit = rendered.info["unit"]
    for cmd in (["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", unit]):
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise lora.LoraError(f"{shlex.join(cmd)} failed: {proc.stderr.strip()}")


@lora_app.command("serve")
def serve(
    base: Annotated[str, typer.Option("--base", help="Base model directory the adapters were trained on.")],
    adapter: Annotated[list[str], typer.Option("--adapter", help="NAME=TRAIN_OUTPUT_DIR (repeatable).")],
    plan: Annotated[Path | None, typer.Option("--plan", help="`ktinfra plan --json` output.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Plan on the fly for this model.")] = None,
    facts: Annotated[Path | None, typer.Option("--facts", help="Facts JSON for planning.")] = None,
    from_dir: Annotated[Path | None, typer.Option("--from", help="Capture folder for planning.")] = None,
    stack: str | None = typer.Option(None, "--stack", help="Stack profile for planning (kt-0.7 | ...)."),
    legacy: bool = typer.Option(False, "--legacy", help="Legacy 0.4.x stack: sglang fork's convert_lora.py."),
    converter: Annotated[Path | None, typer.Option("--converter", help="Converter script path.")] = None,
    converter_python: str = typer.Option("python3", "--converter-python", help="Python with torch."),
    output_dir: Annotated[
        Path | None, typer.Option("--output-dir", help="Converted adapters go here.")
    ] = None,
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing converted adapters."),
    lora_alpha: float | None = typer.Option(None, "--lora-alpha", help="Alpha if the output has none."),
    name: str | None = typer.Option(None, "--name", help="Served model name = systemd instance name."),
    weight_path: str | None = typer.Option(None, "--weight-path", help="Converted CPU expert weights."),
    host: str | None = typer.Option(None, "--host"),
    port: int | None = typer.Option(None, "--port", min=1, max=65535),
    max_loras_per_batch: int = typer.Option(1, "--max-loras-per-batch", min=1),
    lora_backend: str = typer.Option("triton", "--lora-backend", help="triton|csgmv|torch_native|ascend"),
    server_python: str = typer.Option(
        DEFAULT_SERVE_PYTHON, "--server-python", help="Python of the sglang env."
    ),
    out: Annotated[Path | None, typer.Option("--out", help="Write unit + env + plan-lora.json here.")] = None,
    start: bool = typer.Option(
        False, "--start", help="Install and start ktinfra-serve@NAME (root, systemd)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and show; convert and write nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print machine JSON on stdout."),
) -> None:
    """Validate training outputs, convert them for SGLang, render the LoRA serve unit (no GPU experts)."""
    try:
        specs = [lora.parse_adapter_spec(s) for s in adapter]
        names = [n for n, _ in specs]
        if len(set(names)) != len(names):
            raise lora.LoraError(f"adapter names must be unique: {names}")
        adapters = [lora.inspect_adapter(n, p, base) for n, p in specs]
        converting = [a for a in adapters if lora.needs_conversion(a, legacy)]
        script = lora.find_converter(legacy, converter, converter_python) if converting else None
        steps, served = [], {}
        for a in adapters:
            if a not in converting:
                served[a.name] = a.path
                continue
            target = (output_dir / a.name) if output_dir else lora.default_output(a, legacy)
            target = target.resolve()
            lora.check_output_path(a, target)
            if target.exists() and not overwrite:
                raise lora.LoraError(f"{target} already exists; pass --overwrite to replace it")

            def cmd_for(dest: Path, a=a) -> list[str]:
                return lora.conversion_command(a, dest, base, legacy, script, converter_python, lora_alpha)

            cmd_for(target)  # validates arguments (e.g. a missing alpha) before anything runs
            steps.append((a, target, cmd_for))
            served[a.name] = target
        plan_doc = _plan(plan, model, facts, from_dir, stack)
        plan_doc = {
            **plan_doc,
            "serve": lora.lora_plan(plan_doc["serve"], served, max_loras_per_batch, lora_backend),
        }
        instance = name or plan_doc["serve"].get("served_model_name") or Path(base).name
        rendered = render_serve(
            plan_doc,
            name=instance,
            model_path=str(Path(base).resolve()),
            weight_path=weight_path,
            python=server_python,
            host=host,
            port=port,
        )
        rendered.add("plan-lora.json", json.dumps(plan_doc, indent=2) + "\n")
        if out is None and start:
            raise lora.LoraError("--start needs --out (the rendered files are kept there)")
        conversions = [{"adapter": a.name, "output": str(t), "command": c(t)} for a, t, c in steps]
        if not dry_run:
            for (a, target, cmd_for), record in zip(steps, conversions, strict=True):
                started = time.perf_counter()
                lora.convert(a, target, cmd_for, overwrite=overwrite)
                record["seconds"] = round(time.perf_counter() - started, 2)
            if out is not None:
                write_bundle(out, rendered)
            if start:
                _install_and_start(rendered, instance)
    except (lora.LoraError, RenderError) as exc:
        _fail(str(exc))

    result = {
        "adapters": [a.as_dict() for a in adapters],
        "conversions": conversions,
        "serve": plan_doc["serve"],
        "unit": rendered.info["unit"],
        "command": rendered.info["argv"],
        "files": sorted(rendered.files),
        "out": str(out) if out else None,
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
        took = f" in {c['seconds']} s" if "seconds" in c else ""
        console.print(f"{'would convert' if dry_run else 'converted'} {c['adapter']} -> {c['output']}{took}")
    console.print(f"unit {result['unit']}; serve command:")
    console.print(shlex.join(result["command"]), soft_wrap=True, markup=False)


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
