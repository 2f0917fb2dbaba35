"""`ktinfra image build|verify|list`: bake, check and list saved images (Packer templates in images/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from ktinfra.commands import non_empty_path
from ktinfra.image import OUT_ROOT, REPO_ROOT, ImageError, listing
from ktinfra.image import build as build_mod
from ktinfra.image import verify as verify_mod
from ktinfra.profiles import DEFAULT_PROFILE

image_app = typer.Typer(
    help="Bake a reusable image with Packer, verify it with testinfra, list builds.", no_args_is_help=True
)
err = Console(stderr=True)


def _fail(exc: Exception) -> None:
    err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


@image_app.command("build")
def build(
    source: Annotated[str, typer.Option(help="docker (a local image) or amazon-ebs (a GPU AMI).")] = "docker",
    profile: Annotated[
        str, typer.Option(help="Stack profile name, or a profile YAML file.")
    ] = DEFAULT_PROFILE,
    env: Annotated[
        list[str] | None, typer.Option("--env", help="Only these envs of the profile (role or name).")
    ] = None,
    keep: Annotated[
        list[str] | None,
        typer.Option(help="Keep in the image: wheelhouse, models, tokens (repeat, or comma-separated)."),
    ] = None,
    playbook: Annotated[str, typer.Option(callback=non_empty_path, help="Play that provisions.")] = str(
        REPO_ROOT / "playbooks" / "image.yml"
    ),
    out: Annotated[str, typer.Option(callback=non_empty_path, help="Where build directories go.")] = str(
        OUT_ROOT
    ),
    repository: Annotated[str, typer.Option(help="docker: repository of the image tag.")] = "ktinfra/kt",
    tag: Annotated[
        str | None,
        typer.Option(
            help="docker: image tag (default: the profile name; with --env, plus the envs: kt-0.7-inference)."
        ),
    ] = None,
    systemd: Annotated[bool, typer.Option(help="docker: build with systemd as PID 1 (else a shell).")] = True,
    base_image: Annotated[
        str, typer.Option(help="docker: source image.")
    ] = "ktinfra/debian12-systemd:latest",
    wheelhouse: Annotated[str, typer.Option(callback=non_empty_path, help="docker: host wheel cache.")] = str(
        REPO_ROOT / ".cache" / "wheelhouse"
    ),
    region: Annotated[str, typer.Option(help="amazon-ebs: region.")] = "us-east-1",
    instance_type: Annotated[
        str, typer.Option(help="amazon-ebs: build instance (must have AMX).")
    ] = "m7i.8xlarge",
    source_ami: Annotated[
        str | None, typer.Option(help="amazon-ebs: base AMI (default: looked up with boto3).")
    ] = None,
    ssh_username: Annotated[
        str, typer.Option(help="amazon-ebs: the base AMI's login user (ubuntu on Ubuntu AMIs).")
    ] = "ubuntu",
    aws_tag: Annotated[
        list[str] | None,
        typer.Option(
            "--aws-tag",
            help="amazon-ebs: KEY=VALUE tag on the AMI, its snapshots, the build instance and its volumes "
            "(repeat).",
        ),
    ] = None,
    imds_v2: Annotated[
        bool,
        typer.Option(
            "--imds-v2/--no-imds-v2",
            help="amazon-ebs: after the build, set the AMI's ImdsSupport to v2.0, so instances started from "
            "it require IMDSv2 (EC2 cannot undo it).",
        ),
    ] = True,
    packer: Annotated[str, typer.Option(help="packer executable.")] = "packer",
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Only check what was typed (no docker, AWS or packer asked; `make image` runs it first).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Bake the image: playbooks/image.yml through Packer, then validate, clean up and write a manifest."""
    req = build_mod.BuildRequest(
        source=source,
        profile=profile,
        envs=env or [],
        keep=[item.strip() for value in keep or [] for item in value.split(",") if item.strip()],
        playbook=playbook,
        out_root=out,
        repository=repository,
        tag=tag,
        base_image=base_image,
        systemd=systemd,
        wheelhouse=wheelhouse,
        region=region,
        instance_type=instance_type,
        source_ami=source_ami,
        ssh_username=ssh_username,
        aws_tags=aws_tag or [],
        imds_v2=imds_v2,
        packer=packer,
    )
    if check:
        try:
            _, _, name = build_mod.check_input(req)
        except ImageError as exc:
            _fail(exc)
        typer.echo(json.dumps({"ok": True, "build": name}) if as_json else f"input ok: build {name}")
        return
    on_line = None if as_json else _echo
    try:
        result = build_mod.run(req, on_line=on_line)
    except ImageError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps(result, indent=1))
        return
    _print_build(result)


def _echo(line: str) -> None:
    err.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_build(m: dict) -> None:
    console = Console()
    img = m["image"]
    console.print(
        f"[bold]{img.get('tag') or img['id']}[/bold] ({img['source']}, profile {m['profile']['name']}) "
        f"built in {m['build']['duration_s']:.0f} s; manifest {m['build']['output_dir']}/manifest.json"
    )
    table = Table("env", "package", "version", "wheel sha256")
    for p in m["pins"]:
        table.add_row(
            *(escape(str(v)) for v in (p["env"], p["name"], p["version"], (p["sha256"] or "-")[:16]))
        )
    console.print(table)
    for k, v in m["sizes"].items():
        console.print(f"  {escape(str(k))}: {escape(str(v))}")
    for name, env in m["envs"].items():
        for dist, why in (env.get("not_checked") or {}).items():
            console.print(
                f"[yellow]env {escape(name)}: import of {escape(dist)} not checked[/yellow] ({escape(why)})",
                soft_wrap=True,
            )


@image_app.command("verify")
def verify(
    image: Annotated[str, typer.Argument(help="docker image (tag or id) to start and check.")],
    suite: Annotated[
        list[Path] | None, typer.Option(help="testinfra paths (default: tests/infra and the image checks).")
    ] = None,
    manifest: Annotated[
        Path | None,
        typer.Option(help="Build manifest (default: the one under --out whose image id is IMAGE's)."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Where build directories are (build's --out).")] = OUT_ROOT,
    suite_timeout: Annotated[
        int,
        typer.Option(
            min=1,
            max=verify_mod.MAX_SUITE_TIMEOUT_S,
            help="Seconds each suite may take; past them its processes are stopped and it counts as failed.",
        ),
    ] = verify_mod.SUITE_TIMEOUT_S,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Start IMAGE with systemd in docker and run the testinfra suite against it (docker:// backend)."""
    try:
        result = verify_mod.verify(
            image,
            suites=suite or None,
            manifest=manifest,
            on_line=None if as_json else print,
            out_root=out,
            suite_timeout_s=suite_timeout,
        )
    except ImageError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps(result, indent=1))
    else:
        state = "[green]passed[/green]" if result["passed"] else "[red]failed[/red]"
        Console().print(f"{image}: testinfra {state} ({result['summary']})")
    if not result["passed"]:
        raise typer.Exit(1)


@image_app.command("list")
def list_(
    out: Annotated[
        Path | None, typer.Option(help=r"Where build directories are \[default: out/image of the checkout].")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Builds with a manifest, and local docker images labelled by ktinfra."""
    if out is not None and not out.exists():  # a typo; the default is simply absent before the first build
        _fail(f"--out {out} does not exist")
    out = OUT_ROOT if out is None else out
    if out.exists() and not out.is_dir():
        _fail(f"--out {out} is not a directory")
    try:
        rows = listing.builds(out, warn=_warn)
    except ImageError as exc:
        _fail(exc)
    for r in rows:
        if r["error"]:
            _warn(f"skipped {r['error']}")
    if as_json:
        typer.echo(json.dumps(rows, indent=1, allow_nan=False))  # strict JSON: unknown numbers are null
        return
    names = ("image", "source", "profile", "size", "built", "manifest")
    table = Table(*(Column(name, overflow="fold") for name in names))  # paths and tags whole, folded
    for r in rows:
        if r["error"]:
            continue
        size = f"{r['size_bytes'] / 2**30:.2f} GiB" if r.get("size_bytes") else "-"
        cells = (r["image"], r["source"], r["profile"], size, r.get("built") or "-", r.get("manifest") or "-")
        table.add_row(*(escape(str(cell)) for cell in cells))
    Console().print(table)


def _warn(text: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {escape(text)}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(image_app, name="image")
