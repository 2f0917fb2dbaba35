"""`ktinfra render serve|convert|train|lora-convert`: systemd units, env files and recipes into --out."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ktinfra.commands import non_empty_path, non_empty_text
from ktinfra.profiles import SRC_DIR
from ktinfra.render import Rendered, RenderError, load_plan, write_bundle
from ktinfra.render.common import read_api_key_file
from ktinfra.render.convert import (
    CONVERT_ENV_DIR,
    CONVERT_SCRIPT,
    DEFAULT_KTINFRA,
    LEGACY_LORA_SCRIPT,
    LORA_ENV_DIR,
    render_convert,
    render_lora_convert,
)
from ktinfra.render.files import install_map
from ktinfra.render.plans import resolve_plan
from ktinfra.render.serve import DEFAULT_SERVE_PYTHON, render_serve
from ktinfra.render.serve import ENV_DIR as SERVE_ENV_DIR
from ktinfra.render.train import DEFAULT_SFT_PYTHON, LLAMAFACTORY_DIR, render_train
from ktinfra.render.train import ENV_DIR as TRAIN_ENV_DIR

render_app = typer.Typer(
    help="Render systemd units, EnvironmentFiles and LLaMA-Factory recipes from a plan.",
    no_args_is_help=True,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
OutDir = Annotated[
    str,
    typer.Option(
        "--out", metavar="DIR", callback=non_empty_path, help="Directory to write into (created if missing)."
    ),
]
PlanFile = Annotated[
    str | None, typer.Option("--plan", callback=non_empty_path, help="Plan JSON from `ktinfra plan --json`.")
]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Plan on the fly for this model (no --plan).")]
FactsOpt = Annotated[
    str | None, typer.Option("--facts", callback=non_empty_path, help="Facts JSON for on-the-fly planning.")
]
FromOpt = Annotated[
    str | None,
    typer.Option("--from", callback=non_empty_path, help="Capture folder for on-the-fly planning."),
]
SrcDirOpt = Annotated[
    str,
    typer.Option(
        "--src-dir",
        help="Where kt_python_env checked out the legacy profile's git sources (kt_python_env_src_dir).",
    ),
]


def _env_dir_opt(role_var: str) -> object:
    where = f" (the roles pass {role_var})" if role_var else ""
    return typer.Option(
        "--env-dir",
        metavar="DIR",
        callback=non_empty_text,
        help=f"Where the EnvironmentFile goes on the target; the unit's EnvironmentFile= names it{where}.",
    )


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _emit(rendered, out: Path, as_json: bool) -> None:
    written = write_bundle(out, rendered)
    if as_json:
        doc = {"files": written, **rendered.info, "install": install_map(rendered)}
        typer.echo(json.dumps(doc, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"rendered into {out}", show_header=True)
    table.add_column("file")
    table.add_column("mode")
    for path in written:
        table.add_row(escape(path), f"{rendered.files[Path(path).name][1]:04o}")  # as chmod writes it
    console = Console()
    console.print(table)
    for key in ("unit", "health_url", "env_file", "config_file", "numa"):
        if key in rendered.info:
            console.print(f"{key}: {escape(str(rendered.info[key]))}")
    for copy in rendered.info.get("copies", []):  # served from the copy `lora serve` makes (lora.ServedCopy)
        made = "made already" if copy["made"] else "not made yet: `ktinfra lora serve` makes it"
        console.print(
            f"adapter {escape(copy['adapter'])} is served from {escape(copy['output'])}, a copy of "
            f"{escape(copy['source'])} without {escape(copy['left_out'])}, {made}",
            soft_wrap=True,
        )
    for warning in rendered.info.get("warnings", []):  # rendered as asked (render serve: numa_warnings)
        console.print(f"warning: {escape(warning)}", soft_wrap=True)
    for name, target in install_map(rendered).items():
        console.print(f"install {escape(str(name))} -> {escape(str(target))}", soft_wrap=True)
    console.print(f"then: systemctl daemon-reload && systemctl start {rendered.info['unit']}", soft_wrap=True)


def _render_into(out: Path, as_json: bool, render: Callable[[], Rendered]) -> None:
    """Every render subcommand's end: render (plan lookups included), write into --out and report; a
    RenderError is one error line and exit 1."""
    try:
        _emit(render(), out, as_json)
    except RenderError as exc:
        _fail(str(exc))


@render_app.command("serve")
def serve_cmd(
    name: Annotated[str, typer.Option("--name", help="Served model name = systemd instance name.")],
    out: OutDir,
    model_path: Annotated[
        str | None, typer.Option("--model-path", help="Model directory on the target.")
    ] = None,
    plan_file: PlanFile = None,
    model: ModelOpt = None,
    facts: FactsOpt = None,
    from_dir: FromOpt = None,
    weight_path: Annotated[
        str | None, typer.Option("--weight-path", help="Converted CPU expert weights (AMXINT8/4, GGUF).")
    ] = None,
    python: Annotated[
        str, typer.Option("--python", help="Python of the inference env.")
    ] = DEFAULT_SERVE_PYTHON,
    api_key_file: Annotated[
        str | None, typer.Option("--api-key-file", callback=non_empty_path, help="File holding the API key.")
    ] = None,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Override the plan's bind address (non-loopback needs a key)."),
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="Override the plan's port.")] = None,
    extra_arg: Annotated[
        list[str] | None, typer.Option("--extra-arg", help="Extra sglang argument, one word (repeatable).")
    ] = None,
    user: Annotated[str | None, typer.Option("--user", help="Run as this user (default root).")] = None,
    start_timeout: Annotated[
        int, typer.Option("--start-timeout", help="TimeoutStartSec (model loading).")
    ] = 3600,
    numa: Annotated[str, typer.Option("--numa", help="auto | interleave | none (see docs).")] = "auto",
    env_dir: Annotated[str, _env_dir_opt("kt_serve_config_dir")] = SERVE_ENV_DIR,
    as_json: JsonFlag = False,
) -> None:
    """SGLang + kt-kernel server: ktinfra-serve@.service + ktinfra-serve-NAME.env (0600)."""
    _render_into(
        out,
        as_json,
        lambda: render_serve(
            resolve_plan(plan_file, model, facts, from_dir, "serve"),
            name=name,
            model_path=model_path,
            weight_path=weight_path,
            python=python,
            api_key=read_api_key_file(api_key_file),
            host=host,
            port=port,
            extra_args=extra_arg or [],
            user=user,
            start_timeout_s=start_timeout,
            numa=numa,
            env_dir=env_dir,
        ),
    )


PythonOpt = Annotated[str, typer.Option("--python", help="Python of the env that runs the job.")]
UserOpt = Annotated[str | None, typer.Option("--user", help="Run as this user (default root).")]
NameOpt = Annotated[
    str | None, typer.Option("--name", help="Instance name (default: the output's basename).")
]


@render_app.command("convert")
def convert_cmd(
    model_path: Annotated[str, typer.Option("--model-path", help="Original (BF16/FP8) model directory.")],
    output: Annotated[str, typer.Option("--output", help="Directory for the converted CPU expert weights.")],
    out: OutDir,
    method: Annotated[
        str | None,
        typer.Option("--method", help="int8 (AMXINT8) or int4 (AMXINT4); default: the --plan's kt_method."),
    ] = None,
    plan_file: Annotated[
        str | None,
        typer.Option(
            "--plan",
            callback=non_empty_path,
            help="Serve plan (threads = its kt_cpuinfer/threadpools) or current-stack sft plan (threads = "
            "kt_num_threads, pools = those its run loads INT8 experts over).",
        ),
    ] = None,
    name: NameOpt = None,
    input_type: Annotated[
        str | None,
        typer.Option("--input-type", help="bf16|fp16|fp8 (default: plan's native dtype or bf16)."),
    ] = None,
    cpuinfer_threads: Annotated[
        int | None, typer.Option("--cpuinfer-threads", help="Converter threads.")
    ] = None,
    threadpool_count: Annotated[
        int | None,
        typer.Option(
            "--threadpool-count", help="NUMA pools the output is split over (with --plan: the plan's)."
        ),
    ] = None,
    python: PythonOpt = DEFAULT_SERVE_PYTHON,
    script: Annotated[str, typer.Option("--script", help="Path of convert_cpu_weights.py.")] = CONVERT_SCRIPT,
    user: UserOpt = None,
    ktinfra: Annotated[
        str,
        typer.Option(
            "--ktinfra", help="ktinfra on the target; int8 runs its `weights manifest` after converting."
        ),
    ] = DEFAULT_KTINFRA,
    env_dir: Annotated[str, _env_dir_opt("")] = CONVERT_ENV_DIR,
    as_json: JsonFlag = False,
) -> None:
    """CPU expert weight conversion: ktinfra-convert@.service (oneshot) + env. int8 is written as layer
    folders plus kt-weight-manifest.json, the layout kt-kernel also trains from."""
    _render_into(
        out,
        as_json,
        lambda: render_convert(
            model_path=model_path,
            output=output,
            method=method,
            plan=load_plan(plan_file) if plan_file is not None else None,
            name=name,
            input_type=input_type,
            cpuinfer_threads=cpuinfer_threads,
            threadpool_count=threadpool_count,
            python=python,
            script=script,
            user=user,
            ktinfra=ktinfra,
            env_dir=env_dir,
        ),
    )


@render_app.command("lora-convert")
def lora_convert_cmd(
    adapter: Annotated[str, typer.Option("--adapter", help="LoRA adapter directory from the training run.")],
    output: Annotated[str, typer.Option("--output", help="Directory for the SGLang adapter.")],
    out: OutDir,
    legacy: Annotated[bool, typer.Option("--legacy", help="Use the sglang fork's convert_lora.py.")] = False,
    model_path: Annotated[
        str | None, typer.Option("--model-path", help="Base model (current converter's adapter_config).")
    ] = None,
    lora_alpha: Annotated[
        float | None, typer.Option("--lora-alpha", help="When the adapter lacks it.")
    ] = None,
    name: NameOpt = None,
    python: PythonOpt = DEFAULT_SERVE_PYTHON,
    script: Annotated[
        str | None,
        typer.Option(
            "--script",
            help="Converter script (default: kt-kernel's, in --python's env; --legacy: "
            f"{LEGACY_LORA_SCRIPT}, in the sglang checkout under --src-dir).",
        ),
    ] = None,
    src_dir: SrcDirOpt = SRC_DIR,
    user: UserOpt = None,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Let the converter delete a non-empty --output first (current)."),
    ] = False,
    env_dir: Annotated[str, _env_dir_opt("kt_train_lora_config_dir")] = LORA_ENV_DIR,
    as_json: JsonFlag = False,
) -> None:
    """LoRA adapter conversion for SGLang: ktinfra-lora-convert@.service (oneshot) + env."""
    _render_into(
        out,
        as_json,
        lambda: render_lora_convert(
            adapter=adapter,
            output=output,
            legacy=legacy,
            model_path=model_path,
            lora_alpha=lora_alpha,
            name=name,
            python=python,
            script=script,
            src_dir=src_dir,
            user=user,
            overwrite=overwrite,
            env_dir=env_dir,
        ),
    )


@render_app.command("train")
def train_cmd(
    name: Annotated[str, typer.Option("--name", help="Run name = systemd instance name.")],
    model_path: Annotated[str, typer.Option("--model-path", help="BF16 base model directory.")],
    dataset: Annotated[str, typer.Option("--dataset", help="Dataset name(s) in dataset_info.json.")],
    dataset_dir: Annotated[str, typer.Option("--dataset-dir", help="Directory with dataset_info.json.")],
    output_dir: Annotated[str, typer.Option("--output-dir", help="Where checkpoints and the adapter go.")],
    out: OutDir,
    plan_file: PlanFile = None,
    model: ModelOpt = None,
    facts: FactsOpt = None,
    from_dir: FromOpt = None,
    template: Annotated[str | None, typer.Option("--template", help="LLaMA-Factory chat template.")] = None,
    weight_path: Annotated[
        str | None, typer.Option("--weight-path", help="Pre-converted expert weights (kt_weight_path).")
    ] = None,
    weight_format: Annotated[
        str | None,
        typer.Option(
            "--weight-format",
            help="int8 | int4: how --weight-path was converted (default: its -INT8/-INT4 name).",
        ),
    ] = None,
    python: PythonOpt = DEFAULT_SFT_PYTHON,
    llamafactory_dir: Annotated[
        str | None,
        typer.Option(
            "--llamafactory-dir",
            help=f"LLaMA-Factory checkout (legacy kt_optimize_rule paths) [default: {LLAMAFACTORY_DIR}, "
            "its checkout under --src-dir].",
        ),
    ] = None,
    src_dir: SrcDirOpt = SRC_DIR,
    user: UserOpt = None,
    env_dir: Annotated[str, _env_dir_opt("kt_train_config_dir")] = TRAIN_ENV_DIR,
    as_json: JsonFlag = False,
) -> None:
    """LoRA SFT run: RUN.yaml (LLaMA-Factory) + ktinfra-train@.service + env."""
    _render_into(
        out,
        as_json,
        lambda: render_train(
            resolve_plan(plan_file, model, facts, from_dir, "sft"),
            name=name,
            model_path=model_path,
            dataset=dataset,
            dataset_dir=dataset_dir,
            output_dir=output_dir,
            template=template,
            weight_path=weight_path,
            weight_format=weight_format,
            python=python,
            llamafactory_dir=llamafactory_dir,
            src_dir=src_dir,
            user=user,
            env_dir=env_dir,
        ),
    )


def register(app: typer.Typer) -> None:
    app.add_typer(render_app, name="render")
