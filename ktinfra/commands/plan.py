"""`ktinfra plan`: the KT/SGLang/LLaMA-Factory parameters for a model on a host, with a reason for each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ktinfra.commands import non_empty_path, non_empty_text

EXIT_BAD_INPUT = 1
EXIT_INFEASIBLE = 2
# the mode each mode-specific flag applies to (--cpu-format: the planner refuses it in sft itself)
SERVE_FLAGS = ("--lora", "--port", "--host", "--api-key-set", "--max-running-requests", "--weight-path")
FLAG_MODE = {**dict.fromkeys(SERVE_FLAGS, "serve"), "--cutoff-len": "sft", "--expert-format": "sft"}


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _parse_lora(values: list[str]) -> dict[str, str]:
    adapters: dict[str, str] = {}
    for value in values:
        name, sep, directory = (part.strip() for part in value.partition("="))
        if not sep or not name or not directory:
            _fail(f"--lora wants NAME=DIR, got {value!r}")
        if name in adapters:
            _fail(f"--lora name {name!r} given twice ({adapters[name]} and {directory})")
        adapters[name] = directory
    return adapters


def _with_adapters_checked(result: dict, adapters: dict[str, str]) -> dict:
    """What `render serve` checks of a plan's adapters readable here (lora.check_plan_adapters): a render of
    this plan must not start a server that stops on an adapter, its LoRA backend or its tensor parallel. An
    adapter `lora serve` serves from a copy without added_tokens.json is planned with that copy's path, as
    `lora plan` does (against the planned model's tokenizer, lora serve's --base)."""
    if not adapters:
        return result
    from ktinfra import lora

    served = result.get("serve") if isinstance(result.get("serve"), dict) else {}
    backend = (served.get("lora") or {}).get("backend", "triton")
    legacy = result.get("stack_generation") == "legacy"
    model = result.get("model") if isinstance(result.get("model"), dict) else {}
    try:
        # kt_method None: the planner states the KT adapter rules as problems (exit 2) itself
        copies = lora.check_plan_adapters(
            adapters,
            backend,
            lora.plan_tp_size(result),
            None,
            legacy,
            flag="--lora",
            served_base=model.get("path"),
            copies=True,
        )
    except lora.LoraError as exc:
        _fail(str(exc))
    if copies and isinstance(served.get("lora"), dict):
        return lora.with_served_copies(result, copies)
    return result


def _parse_mode(value: str) -> str:
    from ktinfra.planner import MODES

    mode = value.strip().lower()
    if mode not in MODES:
        _fail(f"--mode must be one of {', '.join(MODES)}, not {value!r}")
    return mode


def _refuse_flags_of_the_other_mode(mode: str, values: dict) -> None:
    """values: flag -> what was given; the planner would drop the other mode's flags without a word."""
    for flag, value in values.items():
        if value and FLAG_MODE[flag] != mode:
            _fail(f"{flag} applies to --mode {FLAG_MODE[flag]}, not --mode {mode}")


def _load_facts(facts_file: Path | None, capture_dir: Path | None) -> dict:
    from ktinfra.planner import PlanInputError, load_facts

    if facts_file and capture_dir:
        _fail("give --facts FILE or --from DIR, not both")
    if facts_file:
        try:
            return load_facts(facts_file)
        except PlanInputError as exc:
            _fail(str(exc))
    try:
        from ktinfra import facts as facts_module
    except ImportError:
        _fail("host detection (ktinfra.facts) is not installed in this build; pass --facts FILE.json")
    if capture_dir:
        try:
            is_dir = capture_dir.is_dir()
        except OSError as exc:  # ENAMETOOLONG: is_dir() only swallows "not found"
            _fail(f"--from {capture_dir}: {exc.strerror or exc}")
        if not is_dir:
            _fail(f"--from {capture_dir}: not a directory")
        try:
            return facts_module.from_capture(capture_dir)
        except (OSError, ValueError) as exc:  # e.g. a folder holding none of the capture's files
            _fail(f"--from {capture_dir}: {exc}")
    try:
        return facts_module.gather_live()
    except (OSError, ValueError) as exc:
        _fail(f"cannot read this host's facts: {exc}")


def _flattened(key: str, value) -> list[tuple[str, str]]:
    """Nested settings (kt_config, launcher) as one dotted row each, so a narrow terminal folds them whole."""
    if isinstance(value, dict) and value:
        return [row for sub, item in value.items() for row in _flattened(f"{key}.{sub}", item)]
    shown = json.dumps(value) if isinstance(value, (dict, list, bool)) or value is None else str(value)
    return [(key, shown)]


def _gpu_need(result: dict) -> str:
    """GPU memory as the feasibility check counts it: the estimate plus what the plan reserves beside it."""
    from ktinfra import sizing

    req, parts = result["requirements"], result.get("requirements_breakdown") or {}
    vram = req["vram_bytes"]
    if "gpu_runtime_reserve" in parts:
        reserve = parts["gpu_runtime_reserve"]
        return f"{_gb(vram + reserve)} GPU memory ({_gb(vram)} + {_gb(reserve)} runtime reserve)"
    gpus = len(result["host"]["gpus"])
    if "cuda_runtime" in parts and gpus:
        est = sizing.Estimate(vram, req["ram_bytes"], req["disk_bytes"], parts)
        share, runtime = sizing.sft_per_gpu_bytes(est, gpus), sizing.sft_gpu_runtime_bytes(est)
        return (
            f"{_gb(share + runtime)} GPU memory per GPU ({_gb(share)} allocated at peak + {_gb(runtime)} "
            "CUDA context and allocator cache)"
        )
    return f"{_gb(vram)} GPU memory"


def _gb(value: float) -> str:
    return f"{value / 1e9:.1f} GB"


def _print_human(result: dict) -> None:
    from rich.console import Console
    from rich.table import Column, Table

    console = Console()
    mode = result["mode"]
    model = result["model"]
    console.print(
        f"[bold]{mode} plan[/bold] for {escape(model['name'])} ({model['total_params'] / 1e9:.0f}B, "
        f"{model['num_experts']} experts) on the {result['stack']} stack ({result['stack_generation']})"
    )
    table = Table(*(Column(name, overflow="fold") for name in ("parameter", "value", "reason")))
    reasons = result["reasons"]
    for key, value in result[mode].items():
        if value is None and key not in reasons:
            continue
        reason = reasons.get(key, "")
        for name, shown in _flattened(key, value):
            table.add_row(escape(name), escape(shown), escape(reason))
            reason = ""
    console.print(table)
    req = result["requirements"]
    console.print(f"needs {_gpu_need(result)}, {_gb(req['ram_bytes'])} RAM, {_gb(req['disk_bytes'])} disk")
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    for problem in result["problems"]:
        console.print(f"[red]problem:[/red] {escape(problem)}")
    verdict = "[green]feasible[/green]" if result["feasible"] else "[red]not feasible on this host[/red]"
    console.print(verdict)


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_command(
        model: Annotated[
            str,
            typer.Option(
                "--model", "-m", callback=non_empty_text, help="Short name, HF repo id or model dir."
            ),
        ],
        mode: Annotated[str, typer.Option("--mode", help="serve | sft (any case)")] = "serve",
        facts_file: Annotated[
            str | None,
            typer.Option("--facts", callback=non_empty_path, help="Facts JSON (`ktinfra facts --json`)."),
        ] = None,
        capture_dir: Annotated[
            str | None,
            typer.Option(
                "--from", callback=non_empty_path, help="A capture folder (`ktinfra facts --capture`)."
            ),
        ] = None,
        stack: Annotated[
            str,
            typer.Option("--stack", callback=non_empty_text, help="Stack profile: kt-0.7 | kt-0.4-autodl."),
        ] = "kt-0.7",
        cpu_format: Annotated[
            str | None,
            typer.Option(
                "--cpu-format",
                callback=non_empty_text,
                help="Serve: AMXINT8 | AMXINT4 | BF16 | FP8 | RAWINT4 | GGUF:<TYPE> (LLAMAFILE; Q8_0, Q6_K, "
                "Q4_K_M, Q2_K, ...; GGUF alone: Q4_K_M, or what --weight-path holds).",
            ),
        ] = None,
        lora: Annotated[
            list[str] | None, typer.Option("--lora", help="Serve a LoRA adapter: NAME=DIR (repeatable).")
        ] = None,
        weight_path: Annotated[
            str | None,
            typer.Option(
                "--weight-path",
                callback=non_empty_text,
                help="Serve: converted CPU weights (of --cpu-format) in this directory; not charged again. "
                "A directory of .gguf files states its quant and RAM itself.",
            ),
        ] = None,
        port: Annotated[
            int | None, typer.Option("--port", min=1, max=65535, help="Server port (default 30000).")
        ] = None,
        host: Annotated[
            str | None, typer.Option("--host", help="Bind address (default 127.0.0.1 without API key).")
        ] = None,
        api_key_set: Annotated[
            bool, typer.Option("--api-key-set", help="An API key guards the server.")
        ] = False,
        cutoff_len: Annotated[
            int | None, typer.Option("--cutoff-len", min=64, max=2**31 - 1, help="SFT: fix cutoff_len.")
        ] = None,
        expert_format: Annotated[
            str | None,
            typer.Option(
                "--expert-format",
                callback=non_empty_text,
                help="SFT: the routed experts LoRA trains on: bf16 (default; an FP8 model is cast to BF16 "
                "first) | fp8 (an FP8 model's experts in place, kt-kernel AMXFP8_SFT; current stack).",
            ),
        ] = None,
        max_running_requests: Annotated[
            int | None,
            typer.Option(
                "--max-running-requests",
                min=1,
                max=4096,
                help="Serve: fix the concurrent requests; KV and GPU experts are planned around them.",
            ),
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print the plan as JSON (docs/CONTRACTS.md).")
        ] = False,
    ) -> None:
        """Plan KT serving or LoRA fine-tuning of a model on this host (or on captured facts).

        Exit status: 0 feasible, 2 infeasible (problems listed with numbers), 1 bad input."""
        from ktinfra.planner import PlanInputError, plan

        mode = _parse_mode(mode)
        given = {
            "--lora": lora,
            "--port": port,
            "--host": host,
            "--api-key-set": api_key_set,
            "--max-running-requests": max_running_requests,
            "--weight-path": weight_path,
        }
        _refuse_flags_of_the_other_mode(
            mode, {**given, "--cutoff-len": cutoff_len, "--expert-format": expert_format}
        )
        facts = _load_facts(facts_file, capture_dir)
        options = {
            "stack": stack,
            "cpu_format": cpu_format,
            "lora": _parse_lora(lora or []),
            "port": port,
            "host": host,
            "api_key_set": api_key_set,
            "cutoff_len": cutoff_len,
            "expert_format": expert_format,
            "max_running_requests": max_running_requests,
            "weight_path": weight_path,
        }
        try:
            result = plan(facts, model, mode, **options)
        except PlanInputError as exc:
            _fail(str(exc))
        result = _with_adapters_checked(result, options["lora"])
        if as_json:
            typer.echo(json.dumps(result, indent=2))
        else:
            _print_human(result)
        if not result["feasible"]:
            raise typer.Exit(EXIT_INFEASIBLE)
