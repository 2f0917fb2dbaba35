"""`ktinfra lora serve|plan|check`: serve a LoRA training output through SGLang, then chat through it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ktinfra import lora
from ktinfra.commands import BearerKeyFileOpt, non_empty_path, non_empty_text
from ktinfra.render import RenderError, render_serve, write_bundle
from ktinfra.render.common import check_abs_path, read_api_key_file
from ktinfra.render.files import check_bundle, check_out_dir
from ktinfra.render.plans import plan_section, resolve_plan
from ktinfra.render.serve import DEFAULT_SERVE_PYTHON, ENV_DIR

SYSTEMD_BOOTED = Path("/run/systemd/system")

lora_app = typer.Typer(help="LoRA serving pipeline: convert adapters, render the serve command, chat check.")


def _fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _adapter_specs(specs: list[str]) -> list[tuple[str, Path]]:
    """NAME=DIR options as (name, path) pairs, names unique."""
    parsed = [lora.parse_adapter_spec(s) for s in specs]
    names = [n for n, _ in parsed]
    if len(set(names)) != len(names):
        raise lora.LoraError(f"adapter names must be unique: {names}")
    return parsed


def _inspect_adapters(specs: list[str], base: str) -> list[lora.Adapter]:
    return [lora.inspect_adapter(n, p, base) for n, p in _adapter_specs(specs)]


def _conversion_steps(
    adapters: list[lora.Adapter],
    *,
    base: str,
    legacy: bool,
    converter: Path | None,
    converter_python: str,
    output_dir: Path | None,
    overwrite: bool,
    lora_alpha: float | None,
) -> tuple[list, list[lora.ServedCopy], dict[str, Path]]:
    """What to convert where (every command checked, nothing run), the adapters served from a copy without
    added_tokens.json (lora.base_added_tokens), and the adapter paths to serve."""
    converting = [a for a in adapters if lora.needs_conversion(a, legacy)]
    script = lora.find_converter(legacy, converter, converter_python) if converting else None
    steps, copies, served, targets = [], [], {}, {}
    inputs = {a.name: a.path for a in adapters}
    for a in adapters:
        tokens = None if a in converting else lora.base_added_tokens(a, base)
        if a not in converting and tokens is None:
            lora.check_served_as_is(a, served_base=base)
            served[a.name] = a.path
            continue
        target = lora.output_for(a, legacy, output_dir)
        lora.check_output_path(a, target)
        lora.check_targets_apart(a.name, target, targets, inputs)
        served[a.name] = target
        if tokens is not None:
            lora.check_served_as_is(a, copied=True)
            copies.append(lora.plan_served_copy(a, target, tokens, overwrite))
            continue
        if target.exists() and not overwrite:
            raise lora.LoraError(f"{target} already exists; pass --overwrite to replace it")

        def cmd_for(dest: Path, a=a) -> list[str]:
            return lora.conversion_command(a, dest, base, legacy, script, converter_python, lora_alpha)

        cmd_for(target)  # validates arguments (e.g. a missing alpha) before anything runs
        steps.append((a, target, cmd_for))
    return steps, copies, served


def _stage_file(target: Path, content: str, mode: int) -> Path:
    """The content in a temporary file beside target, created with its final mode, so an env file holding
    the API key is never world-readable; removed again when writing it fails."""
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w") as handle:
            handle.write(content)
    except BaseException:  # a full disk, an interrupt: no half-written copy (of the API key) left beside it
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _install_files(files: dict[Path, tuple[str, int]]) -> None:
    """Every file is written beside its target before any target is replaced: a write that fails leaves the
    installed unit and env file as they were, not a new one of the pair beside the old other."""
    staged: dict[Path, Path] = {}
    try:
        for target, (content, mode) in files.items():
            staged[target] = _stage_file(target, content, mode)
    except BaseException:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        raise
    for target, tmp in staged.items():
        tmp.replace(target)


def _check_can_start() -> None:
    """--start installs into /etc and runs systemctl: refuse before converting or installing anything where
    that cannot work, so no unit is left installed but not started."""
    if shutil.which("systemctl") is None:
        raise lora.LoraError("--start needs systemd (systemctl not found); use --out and start it yourself")
    if not SYSTEMD_BOOTED.is_dir():  # sd_booted(3): systemd is not the init of this system (a container?)
        raise lora.LoraError(
            f"--start needs systemd as init ({SYSTEMD_BOOTED} is missing); use --out and start it yourself"
        )
    if os.geteuid() != 0:
        raise lora.LoraError("--start needs root (it installs into /etc/systemd/system and /etc/ktinfra)")


UNIT_DIR = Path("/etc/systemd/system")
_ENV_FILE_LINE = re.compile(r"^EnvironmentFile=(.*)/%i\.env$", re.MULTILINE)


def _check_template(rendered) -> None:
    """Refuse to replace an installed ktinfra-serve@.service whose instances read their env files from
    another directory (kt_serve_config_dir moved): every other instance would lose its EnvironmentFile."""
    name = "ktinfra-serve@.service"
    try:
        installed = (UNIT_DIR / name).read_text()
    except FileNotFoundError:
        return
    theirs = _ENV_FILE_LINE.search(installed)
    ours = _ENV_FILE_LINE.search(rendered.files[name][0])
    if theirs and ours and theirs.group(1) != ours.group(1):
        where = theirs.group(1).replace("%%", "%")
        raise lora.LoraError(
            f"{UNIT_DIR / name} reads its instances' env files from {where} (kt_serve_config_dir): "
            f"installing this one would point every instance at {ours.group(1).replace('%%', '%')}; "
            f"pass --env-dir {where}"
        )


def _installed_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return ""  # unreadable or not text: taken as changed


def _install_and_start(rendered, name: str, adapters_written: bool = False) -> None:
    """Install the rendered unit template + env file and start the instance (serve ran _check_can_start).
    An instance already running on other files, or on adapters this run wrote (`adapters_written`: converted,
    or copied anew, under the paths it loads them from), is restarted: `enable --now` alone leaves it serving
    the adapters it was started with. One whose files did not change keeps running (no model reload)."""
    unit_dir, env_dir = UNIT_DIR, Path(rendered.info["env_file"]).parent
    changed = False
    try:
        env_dir.mkdir(parents=True, exist_ok=True)
        files = {
            env_dir / f"{name}.env" if file_name.endswith(".env") else unit_dir / file_name: (content, mode)
            for file_name, (content, mode) in rendered.files.items()
            if file_name.endswith((".service", ".env"))
        }
        changed = any(_installed_text(target) != content for target, (content, _) in files.items())
        _install_files(files)
    except OSError as exc:
        raise lora.LoraError(f"cannot install the unit (--start needs root): {exc}") from exc
    unit = rendered.info["unit"]
    # try-restart does nothing when it is not running
    restart = [["systemctl", "try-restart", unit]] if changed or adapters_written else []
    for cmd in (["systemctl", "daemon-reload"], *restart, ["systemctl", "enable", "--now", unit]):
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise lora.LoraError(f"{shlex.join(cmd)} failed: {proc.stderr.strip()}")


@lora_app.command("serve")
def serve(
    base: Annotated[
        str,
        typer.Option(
            "--base", callback=non_empty_text, help="Base model directory the adapters were trained on."
        ),
    ],
    adapter: Annotated[list[str], typer.Option("--adapter", help="NAME=TRAIN_OUTPUT_DIR (repeatable).")],
    plan: Annotated[
        str | None, typer.Option("--plan", callback=non_empty_path, help="`ktinfra plan --json` output.")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Plan on the fly for this model.")] = None,
    facts: Annotated[
        str | None, typer.Option("--facts", callback=non_empty_path, help="Facts JSON for planning.")
    ] = None,
    from_dir: Annotated[
        str | None, typer.Option("--from", callback=non_empty_path, help="Capture folder for planning.")
    ] = None,
    stack: str | None = typer.Option(None, "--stack", help="Stack profile for planning (kt-0.7 | ...)."),
    legacy: bool = typer.Option(False, "--legacy", help="Legacy 0.4.x stack: sglang fork's convert_lora.py."),
    converter: Annotated[
        str | None,
        typer.Option("--converter", metavar="PATH", callback=non_empty_path, help="Converter script path."),
    ] = None,
    converter_python: str = typer.Option("python3", "--converter-python", help="Python with torch."),
    output_dir: Annotated[
        str | None,
        typer.Option(
            "--output-dir", metavar="DIR", callback=non_empty_path, help="Converted adapters go here."
        ),
    ] = None,
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing converted adapters."),
    lora_alpha: float | None = typer.Option(
        None, "--lora-alpha", help="Alpha for an output without lora_alpha (one that has its own is refused)."
    ),
    name: str | None = typer.Option(None, "--name", help="Served model name = systemd instance name."),
    weight_path: str | None = typer.Option(None, "--weight-path", help="Converted CPU expert weights."),
    host: str | None = typer.Option(None, "--host", help="Bind address (non-loopback needs --api-key-file)."),
    api_key_file: Annotated[
        str | None,
        typer.Option("--api-key-file", callback=non_empty_path, help="File holding the server's API key."),
    ] = None,
    port: int | None = typer.Option(None, "--port", min=1, max=65535),
    max_loras_per_batch: int = typer.Option(1, "--max-loras-per-batch", min=1),
    lora_backend: str = typer.Option(
        "triton", "--lora-backend", help="triton|csgmv|torch_native (embed_tokens LoRA: triton only)"
    ),
    server_python: str = typer.Option(
        DEFAULT_SERVE_PYTHON, "--server-python", help="Python of the sglang env."
    ),
    out: Annotated[
        str | None,
        typer.Option(
            "--out", metavar="DIR", callback=non_empty_path, help="Write unit + env + plan-lora.json here."
        ),
    ] = None,
    start: bool = typer.Option(
        False, "--start", help="Install and start ktinfra-serve@NAME (root, systemd)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and show; convert and write nothing."),
    env_dir: str = typer.Option(
        ENV_DIR, "--env-dir", help="Where the instance's env file goes (kt_serve's kt_serve_config_dir)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print machine JSON on stdout."),
) -> None:
    """Validate training outputs, convert them for SGLang, render the LoRA serve unit (no GPU experts)."""
    try:
        if out is None and start:
            raise lora.LoraError("--start needs --out (the rendered files are kept there)")
        lora.check_lora_alpha(lora_alpha)
        if out is not None:
            check_out_dir(out)
        api_key = read_api_key_file(api_key_file)
        adapters = _inspect_adapters(adapter, base)
        lora.check_training_outputs(adapters, legacy, lora_alpha)
        steps, copies, served = _conversion_steps(
            adapters,
            base=base,
            legacy=legacy,
            converter=converter,
            converter_python=converter_python,
            output_dir=output_dir,
            overwrite=overwrite,
            lora_alpha=lora_alpha,
        )
        plan_doc = resolve_plan(plan, model, facts, from_dir, "serve", stack)
        lora.check_kt_lora_serving(adapters, plan_section(plan_doc, "serve").get("kt_method"), legacy)
        plan_section(plan_doc, "serve")  # a plan without one is refused here, not in lora_plan
        plan_doc = lora.lora_plan(plan_doc, served, max_loras_per_batch, lora_backend)
        targets = {a.name: a.config.get("target_modules") for a in adapters}
        lora.check_lora_backend(targets, lora_backend, lora.plan_tp_size(plan_doc))
        instance = name or plan_doc["serve"].get("served_model_name") or Path(base).name
        rendered = render_serve(
            plan_doc,
            name=instance,
            model_path=str(Path(base).resolve()),
            weight_path=weight_path,
            python=server_python,
            api_key=api_key,
            host=host,
            port=port,
            env_dir=env_dir,
            converting=frozenset([*(a.name for a, _, _ in steps), *(c.adapter.name for c in copies)]),
        )
        rendered.add("plan-lora.json", json.dumps(plan_doc, indent=2) + "\n")
        conversions = [{"adapter": a.name, "output": str(t), "command": c(t)} for a, t, c in steps]
        if start and not dry_run:
            _check_can_start()
            _check_template(rendered)
        if out is not None:
            check_bundle(out, rendered)  # a bundle that cannot be written stops the run before converting
        if not dry_run:
            # all or nothing: when one conversion fails, the outputs this run made for the others go too
            seconds = lora.convert_all(steps, overwrite=overwrite, copies=copies)
            for record, took in zip(conversions, seconds, strict=True):
                record["seconds"] = took
            if out is not None:
                write_bundle(out, rendered)
            if start:
                written = bool(steps) or any(c.action != "keep" for c in copies)
                _install_and_start(rendered, instance, adapters_written=written)
    except (lora.LoraError, RenderError) as exc:
        _fail(str(exc))
    except OSError as exc:  # a path the checks could not even look at (ENAMETOOLONG, EACCES on a parent)
        _fail(f"{exc.filename or 'a path'}: {exc.strerror or exc}")

    result = {
        "adapters": [a.as_dict() for a in adapters],
        "conversions": conversions,
        "copies": [c.as_dict() for c in copies],
        "serve": plan_doc["serve"],
        "unit": rendered.info["unit"],
        "command": rendered.info["argv"],
        "files": sorted(rendered.files),
        "out": str(out) if out else None,
        "dry_run": dry_run,
        "started": start and not dry_run,
        "warnings": rendered.info.get("warnings", []),  # render serve's, e.g. a kt_numa_nodes out of order
    }
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    console = Console()
    for a in adapters:
        console.print(
            f"adapter [bold]{escape(a.name)}[/bold]: {a.kind}, r={a.rank}, alpha={a.alpha}, "
            f"{a.tensors} tensors"
        )
        for warning in a.warnings:
            console.print(f"  [yellow]warning:[/yellow] {escape(warning)}")
    for c in conversions:
        took = f" in {c['seconds']} s" if "seconds" in c else ""
        console.print(
            f"{'would convert' if dry_run else 'converted'} "
            f"{escape(str(c['adapter']))} -> {escape(str(c['output']))}{took}"
        )
    for c in copies:
        console.print(_copy_line(c, dry_run), soft_wrap=True, markup=False)
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", soft_wrap=True)
    console.print(f"unit {result['unit']}; serve command:")
    console.print(shlex.join(result["command"]), soft_wrap=True, markup=False)


def _copy_line(copy: lora.ServedCopy, dry_run: bool) -> str:
    """What `lora serve` did (or would do) about an adapter served from a copy without added_tokens.json."""
    why = (
        f"without {lora.ADDED_TOKENS_FILE}: sglang-kt refuses an adapter listing added tokens, and its "
        f"{copy.tokens} entries have the same ids in {copy.tokenizer}"
    )
    if copy.action == "keep":
        return f"kept {copy.target}: already the copy of {copy.adapter.name} {why}"
    if copy.action == "replace":
        verb = "would replace" if dry_run else "replaced"
        return f"{verb} {copy.target} (--overwrite) with the copy of {copy.adapter.name} {why}"
    return f"{'would copy' if dry_run else 'copied'} {copy.adapter.name} -> {copy.target} {why}"


def _planned_adapters(specs: list[str]) -> dict[str, Path]:
    """NAME=DIR adapters (already in SGLang's format) for the plan: names unique and instance-safe, paths
    absolute."""
    return {name: Path(check_abs_path(f"adapter {name}", str(path))) for name, path in _adapter_specs(specs)}


@lora_app.command("plan")
def plan_cmd(
    plan: Annotated[
        str,
        typer.Option("--plan", callback=non_empty_path, help="`ktinfra plan --json` output (mode serve)."),
    ],
    adapter: Annotated[
        list[str], typer.Option("--adapter", help="NAME=DIR of an adapter SGLang loads (repeatable).")
    ],
    max_loras_per_batch: int = typer.Option(1, "--max-loras-per-batch", min=1),
    lora_backend: str = typer.Option(
        "triton", "--lora-backend", help="triton|csgmv|torch_native (embed_tokens LoRA: triton only)"
    ),
    output_dir: Annotated[
        str | None,
        typer.Option(
            "--output-dir",
            metavar="DIR",
            callback=non_empty_path,
            help="lora serve's --output-dir: where the served copies are (default: beside each adapter).",
        ),
    ] = None,
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON on stdout."),
) -> None:
    """Put converted adapters on a serve plan: every expert on the CPU, no GPU prefill threshold, at least
    2 running requests (what sglang-kt needs for KT LoRA). Prints the plan for `ktinfra render serve`. An
    adapter `lora serve` serves from a copy without added_tokens.json is planned with that copy's path
    (in --output-dir, as lora serve's)."""
    try:
        plan_doc = resolve_plan(plan, None, None, None, "serve")
        adapters = _planned_adapters(adapter)
        kt_method = plan_section(plan_doc, "serve").get("kt_method")  # a plan without one stops here
        plan_doc = lora.lora_plan(plan_doc, adapters, max_loras_per_batch, lora_backend)
        legacy = plan_doc.get("stack_generation") == "legacy"
        remedy = f"serve each of {', '.join(adapters)} from its own instance"
        tp_size = lora.plan_tp_size(plan_doc)
        model = plan_doc.get("model")
        served_base = model.get("path") if isinstance(model, dict) else None  # lora serve's --base
        copies = lora.check_planned_adapters(
            adapters, lora_backend, tp_size, kt_method, legacy, remedy, served_base=served_base, copies=True,
            output_dir=Path(output_dir) if output_dir else None,
        )  # fmt: skip
        plan_doc = lora.with_served_copies(plan_doc, copies)
    except (lora.LoraError, RenderError) as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(plan_doc, indent=2))
        return
    console = Console()
    for key in ("kt_num_gpu_experts", "kt_max_deferred_experts_per_token", "kt_gpu_prefill_token_threshold",
                "max_running_requests", "lora"):  # fmt: skip
        why = plan_doc["reasons"].get(key) or json.dumps(plan_doc["serve"].get(key))
        console.print(f"[bold]{key}[/bold]: {escape(str(why))}", soft_wrap=True)


@lora_app.command("check")
def check(
    url: str = typer.Option(..., "--url", help="Server or router base URL."),
    model: str = typer.Option(
        ...,
        "--model",
        callback=non_empty_text,
        help="Served model name (no ':'; the adapter goes in --adapter).",
    ),
    adapter: str | None = typer.Option(
        None, "--adapter", callback=non_empty_text, help="Adapter name (left side of --lora-paths)."
    ),
    legacy: bool = typer.Option(False, "--legacy", help="Select the adapter with the lora_path field."),
    prompt: str = typer.Option("Say hello in one short sentence.", "--prompt"),
    max_tokens: int = typer.Option(32, "--max-tokens", min=1),
    timeout: float = typer.Option(120.0, "--timeout", min=1.0),
    api_key_file: BearerKeyFileOpt = None,
    as_json: bool = typer.Option(False, "--json", help="Print machine JSON on stdout."),
) -> None:
    """Send one chat request through the endpoint and check that a reply comes back."""
    try:
        lora.check_endpoint(url, timeout)  # bad input: one error line, no result
        api_key = read_api_key_file(api_key_file)
        result = lora.chat_check(url, model, adapter, legacy, prompt, max_tokens, timeout, api_key)
    except (lora.LoraError, RenderError) as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    elif result["ok"]:
        Console().print(f"[green]ok[/green] in {result['latency_s']} s: {escape(repr(result['reply']))}")
    else:
        Console(stderr=True).print(f"[red]chat check failed[/red]: {escape(str(result['error']))}")
    if not result["ok"]:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(lora_app, name="lora")
