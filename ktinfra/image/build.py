"""`ktinfra image build`: check the input, write packer's variables, run packer, write the manifest.

Output goes to OUT/<profile>-<source>/ (manifest.json, packages.json, packer-manifest.json, build.log and
the variable files). It is assembled in a .partial directory and renamed at the end: a failed build
leaves only OUT/last-failed.log and no container.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ktinfra import __version__
from ktinfra.image import OUT_ROOT, REPO_ROOT, SOURCES, TEMPLATE, ImageError, aws, dockercli, manifest, spec
from ktinfra.image.packer_adapter import Packer, ensure_available
from ktinfra.image.signals import sigterm_unwinds
from ktinfra.profiles import DEFAULT_PROFILE, is_profile_file, python_versions

KEEP_CHOICES = ("wheelhouse", "models", "tokens")
SSH_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")  # the base AMI's login: ubuntu, ec2-user, admin, ...
# docker's reference grammar (distribution/reference): packer validate accepts any string, and the
# docker-tag post-processor refuses a bad one only after the whole build and its `docker commit`
_DOCKER_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DOCKER_PATH = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOCKER_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?")
WHEELHOUSE_IN_IMAGE = "/var/cache/ktinfra/wheelhouse"
# amazon-ebs: images/kt.pkr.hcl names the AMI "${var.aws_ami_name}-${var.profile}-{{timestamp}}" (ktinfra
# sets aws_ami_name to this); {{timestamp}} is packer's Unix time in seconds, 10 digits until 2286.
AMI_NAME_PREFIX = "ktinfra-kt"
AMI_TIMESTAMP_DIGITS = 10
# the tags an amazon-ebs build sets besides Name (the labels and the manifest's start): --aws-tag cannot
LABEL_KEYS = ("ktinfra.profile", "ktinfra.version", "ktinfra.revision")
KTINFRA_TAGS = (*LABEL_KEYS, "ktinfra.build-started")
# EC2 CreateImage/RegisterImage Name: 3-128 letters, digits, ( ) [ ] space . / ' @ _ -. packer's amazon-ebs
# refuses any other at validate, with its own message, after the boto3 look-ups and the stage directory;
# a profile name may hold a +, which an AMI name may not (EC2 tags take it: the ktinfra.profile tag keeps it)
_AMI_CHAR = r"[A-Za-z0-9()\[\] ./'@_-]"
_AMI_NAME = re.compile(rf"{_AMI_CHAR}{{3,128}}")


@dataclass
class BuildRequest:
    source: str = "docker"
    profile: str = DEFAULT_PROFILE
    envs: list[str] = field(default_factory=list)
    out_root: Path = OUT_ROOT
    playbook: Path = REPO_ROOT / "playbooks" / "image.yml"
    keep: list[str] = field(default_factory=list)
    packer: str = "packer"
    # docker
    base_image: str = "ktinfra/debian12-systemd:latest"
    repository: str = "ktinfra/kt"
    tag: str | None = None
    systemd: bool = True
    wheelhouse: Path = REPO_ROOT / ".cache" / "wheelhouse"
    # amazon-ebs
    region: str = "us-east-1"
    instance_type: str = "m7i.8xlarge"
    source_ami: str | None = None
    ssh_username: str = "ubuntu"
    aws_tags: list[str] = field(default_factory=list)  # KEY=VALUE, as typed
    imds_v2: bool = True  # set the AMI's ImdsSupport to v2.0 after the build (cannot be undone)


@dataclass
class Prepared:
    request: BuildRequest
    profile: dict
    envs: dict
    name: str
    variables: dict
    extra: dict = field(default_factory=dict)


def default_tag(profile: dict, envs: dict) -> str:
    """The profile's name, and the envs baked when they are not all of them: `--env inference` no longer
    takes the full image's tag and build folder (kt-0.7 -> kt-0.7-inference)."""
    roles = sorted(spec["role"] for spec in envs.values())
    if set(roles) == set(profile.get("envs") or {}):
        return profile["name"]
    return "-".join([profile["name"], *roles])


def check_input(req: BuildRequest) -> tuple[dict, dict, str]:
    """The checks that need neither docker, AWS nor packer (what was typed: source, profile, envs, tag,
    --keep, --out, ...): `image build --check` and `make image` run them before anything is installed.
    Returns (profile, envs, build name: the default tag and the source)."""
    if req.source not in SOURCES:
        raise ImageError(f"unknown source {req.source!r}; choose one of: {', '.join(SOURCES)}")
    if not SSH_USER.fullmatch(req.ssh_username):
        raise ImageError(f"--ssh-username {req.ssh_username!r} is not a user name")
    bad_keep = sorted(set(req.keep) - set(KEEP_CHOICES))
    if bad_keep:
        raise ImageError(f"--keep accepts {', '.join(KEEP_CHOICES)}; got {', '.join(bad_keep)}")
    if req.source == "docker" and "wheelhouse" in req.keep:
        # cleanup.sh leaves a mounted wheelhouse alone, and docker commit leaves mounts out: never kept
        raise ImageError(
            f"--keep wheelhouse: the docker build mounts the wheelhouse from this host ({req.wheelhouse}), "
            "and docker commit leaves mounts out of the image; the wheels stay there (amazon-ebs keeps them)"
        )
    if not req.playbook.is_file():
        raise ImageError(f"playbook {req.playbook} not found")
    profile = spec.load(req.profile)
    envs = spec.env_specs(profile, only=req.envs or None)
    unbakeable = spec.bake_problems(profile, envs)
    if unbakeable:
        # the --env hint only where it can work: an env of the profile that pins packages and bakes alone
        bakeable = [
            env["role"]
            for name, env in spec.env_specs(profile).items()
            if not spec.bake_problems(profile, {name: env})
        ]
        raise ImageError(
            f"profile {profile['name']} cannot be baked into an image: {'; '.join(unbakeable)}. The image "
            "build makes venvs from pinned wheels; provision such a host with playbooks/provision.yml "
            "(conda, kt_python_env_wheels)"
            + (f", or bake only the envs it can (--env {' --env '.join(bakeable)})" if bakeable else "")
        )
    base = default_tag(profile, envs)
    name = f"{base}-{req.source}"
    if req.source == "docker":
        _check_reference(req.repository, req.tag or base, tag_given=req.tag is not None)
    else:
        _check_ami_name(profile["name"], envs=base.removeprefix(profile["name"]))
    _check_packer_paths(req)
    _check_out(req.out_root, name)
    if req.source == "docker":
        _check_dir(req.wheelhouse, "--wheelhouse")
    if req.aws_tags and req.source != "amazon-ebs":
        raise ImageError(
            f"--aws-tag tags what an amazon-ebs build makes on AWS; this is --source {req.source}"
        )
    if not req.imds_v2 and req.source != "amazon-ebs":
        raise ImageError(
            f"--no-imds-v2 leaves an amazon-ebs build's AMI without the IMDSv2 requirement; this is --source "
            f"{req.source}, which makes no AMI"
        )
    if req.source == "amazon-ebs":
        aws.parse_tags(req.aws_tags, KTINFRA_TAGS)
        aws.check_names(req.region, req.source_ami)
        aws.check_type_name(req.instance_type)
        if req.source_ami is None:
            aws.usable_ami_patterns(python_versions(profile))
    return profile, envs, name


def prepare(req: BuildRequest, ec2=None) -> Prepared:
    """Every check that can refuse the build, before anything is started or written."""
    profile, envs, name = check_input(req)
    base_tag = name.removesuffix(f"-{req.source}")
    git = manifest.git_revision()  # once: the label and the manifest name the same commit
    labels = dict(zip(LABEL_KEYS, (profile["name"], __version__, git["revision"] or "unknown"), strict=True))
    # one source of truth: the template takes the paths and run options ktinfra also uses, no copies
    variables = {
        "profile": profile["name"],
        "wheelhouse": WHEELHOUSE_IN_IMAGE,
        "docker_systemd_run_args": dockercli.SYSTEMD_RUN_ARGS,  # set for every source: it has no default
        "cleanup_keep": ",".join(req.keep),
        "labels": labels,
    }
    extra: dict = {"git": git}
    if req.source == "docker":
        dockercli.ensure_daemon()
        base = dockercli.image_info(req.base_image)
        if base is None:
            raise ImageError(f"base image {req.base_image} is not here: run `bash scripts/docker-ready.sh`")
        extra["base"] = {"ref": req.base_image, "id": base["id"], "size_bytes": base["size_bytes"]}
        container = profile["name"].replace("+", "_")
        variables |= {
            "docker_base_image": req.base_image,
            "docker_repository": req.repository,
            "docker_tag": req.tag or base_tag,
            # a container name takes [a-zA-Z0-9_.-]: a profile name's + becomes _
            "docker_container_name": f"image-build-{container}-{secrets.token_hex(3)}",
            "docker_systemd": req.systemd,
            "wheelhouse_host_dir": str(req.wheelhouse.resolve()),
        }
    else:
        pythons = python_versions(profile)
        itype, ami = aws.look_up(req.region, req.instance_type, req.source_ami, ec2=ec2, pythons=pythons)
        extra |= {"base": ami, "instance": itype, "region": req.region}
        volume_gb = _root_volume_gb(profile, envs, ami)
        variables |= {
            "aws_ami_name": AMI_NAME_PREFIX,
            "aws_ami_envs": base_tag.removeprefix(profile["name"]),  # "-inference" for --env inference
            "aws_region": req.region,
            "aws_source_ami": ami["id"],
            "aws_instance_type": req.instance_type,
            "aws_ssh_username": req.ssh_username,
            "aws_root_device_name": ami["root_device"],
            "aws_root_volume_gb": volume_gb,
            "aws_tags": aws.parse_tags(req.aws_tags, KTINFRA_TAGS),
        }
    return Prepared(req, profile, envs, name, variables, extra)


def _root_volume_gb(profile: dict, envs: dict, ami: dict) -> int:
    """The build instance's root volume: never smaller than the base AMI's root snapshot, which EC2 refuses
    to launch (InvalidBlockDeviceMapping) only after packer has started. Computed: the snapshot, when larger
    than spec.BASE_VOLUME_GB, is the base the envs are added to; the profile's own size is refused."""
    snapshot = ami.get("root_snapshot_gb")
    size = spec.root_volume_gb(profile, envs, base_gb=snapshot or spec.BASE_VOLUME_GB)
    if snapshot and size < snapshot:
        raise ImageError(
            f"profile {profile['name']}: image.root_volume_gb is {size} GB, and the root snapshot of base "
            f"AMI {ami['id']} ({ami.get('name')}) is {snapshot} GB: EC2 launches it on no smaller volume. "
            f"Set image.root_volume_gb to at least {snapshot} plus what the envs need, or leave it unset"
        )
    return size


def _check_reference(repository: str, tag: str, tag_given: bool) -> None:
    """ImageError unless repository:tag is a reference docker takes (lowercase path components, an optional
    registry host[:port] first; a tag of letters, digits, _ . - up to 128 characters)."""
    first, _, rest = repository.partition("/")
    host = rest and ("." in first or ":" in first or first == "localhost")
    parts = rest.split("/") if host else repository.split("/")
    if (
        len(repository) > 255
        or (host and not _DOCKER_HOST.fullmatch(first))
        or not all(_DOCKER_PATH.fullmatch(part) for part in parts)
    ):
        raise ImageError(
            f"--repository {repository!r} is not a docker repository name: lowercase letters, digits and "
            "separators (. _ __ -) in /-separated parts, optionally after a registry host[:port]/"
        )
    if not _DOCKER_TAG.fullmatch(tag):
        what = f"--tag {tag!r}" if tag_given else f"the profile name {tag!r} (the default tag)"
        raise ImageError(
            f"{what} is not a docker tag: letters, digits, _ . -, not starting with . or -, at most 128 "
            f"characters{'' if tag_given else '; give --tag'}"
        )


def ami_name(profile_name: str, timestamp: str = "0" * AMI_TIMESTAMP_DIGITS, envs: str = "") -> str:
    """The name packer gives the AMI of `profile_name` (images/kt.pkr.hcl's ami_name); `envs` is its
    aws_ami_envs, "-inference" when only that env is baked (--env)."""
    return f"{AMI_NAME_PREFIX}-{profile_name}{envs}-{timestamp}"


def _check_ami_name(profile_name: str, envs: str = "") -> None:
    """ImageError unless the AMI of this profile gets a name EC2 takes. Refused, not mapped: the AMI name is
    what a user finds the image by (as the docker tag, which is refused too; the transient build container's
    name maps + to _), and a mapped kt-0.7+cu128 would read as a profile kt-0.7_cu128."""
    name = ami_name(profile_name, envs=envs)
    if _AMI_NAME.fullmatch(name):
        return
    bad = sorted(set(re.sub(_AMI_CHAR, "", name)))
    most = 128 - len(ami_name("", envs=envs))
    if bad:
        why = f"it holds {' '.join(repr(c) for c in bad)}"
        fix = f"has none (such as {re.sub(f'(?!{_AMI_CHAR}).', '_', profile_name)!r})"
    else:
        why = f"it would be {len(name)} characters"
        fix = f"is at most {most} characters"
    raise ImageError(
        f"profile {profile_name!r} cannot name an AMI: the amazon-ebs build names it "
        f"{AMI_NAME_PREFIX}-{profile_name}{envs}-<timestamp>, and EC2 takes an AMI name of 3 to 128 letters, "
        f"digits, spaces and ( ) [ ] . / ' @ _ - only; {why}. Copy the profile to a file whose name {fix} "
        "and build with --profile FILE.yaml, or build --source docker"
    )


def _check_packer_paths(req: BuildRequest) -> None:
    """ImageError unless the paths handed to packer reach it as typed. Packer runs Go-template interpolation
    over its settings after HCL (the template's {{timestamp}}), so a `{{` in a path is rewritten: the build
    stopped at validate with a path that was never typed, or (the wheelhouse) docker mounted and created
    another host directory as root. The docker builder passes volumes as `-v HOST:IMAGE`: a `:` in the
    wheelhouse path splits it there and `docker run` fails after the build has started."""
    paths = [("--out", req.out_root), ("--playbook", req.playbook), ("the checkout", TEMPLATE.parent)]
    if req.source == "docker":
        paths.append(("--wheelhouse", req.wheelhouse))
    if is_profile_file(req.profile):
        # the play gets the file's path in its extra vars (ktinfra_profile_ref), which ansible templates:
        # a{{ 7*6 }}b.yaml would read a42b.yaml while the manifest names the typed file
        paths.append(("--profile", Path(req.profile)))
    for what, path in paths:
        try:
            resolved = str(path.resolve())
        except (OSError, RuntimeError):  # a symlink loop: _check_dir says so
            resolved = str(path)
        for shown in dict.fromkeys((str(path), resolved)):
            if what == "--profile" and any(mark in shown for mark in ("{{", "{%", "{#")):
                raise ImageError(
                    f"--profile {shown} holds a Jinja2 delimiter ({{{{, {{% or {{#}}), which ansible reads "
                    "as a template in the play's variables; use another path"
                )
            if "{{" in shown:
                raise ImageError(
                    f"{what} {shown} holds '{{{{', which packer reads as a template; use another path"
                )
            if what == "--wheelhouse" and ":" in shown:
                raise ImageError(
                    f"--wheelhouse {shown} holds ':', which splits docker's -v HOST:DIR mount; "
                    "use another path"
                )


def _check_dir(path: Path, what: str) -> None:
    """ImageError unless `path` is a writable directory or can be made one (its nearest existing ancestor
    is a writable directory)."""
    try:
        probe = path
        while not probe.exists() and not probe.is_symlink() and probe.parent != probe:
            probe = probe.parent
        if not probe.is_dir():
            where = "" if probe == path else f": {probe} is not a directory"
            raise ImageError(f"{what} {path} {'cannot be made' if where else 'is not a directory'}{where}")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise ImageError(f"{what} {path}: {probe} is not writable")
    except OSError as exc:
        raise ImageError(f"{what} {path} cannot be used: {exc}") from exc


def _check_out(out_root: Path, name: str) -> None:
    """--out can hold the build directory, its .partial stage and last-failed.log."""
    _check_dir(out_root, "--out")
    try:
        for sub in (out_root / name, out_root / f"{name}.partial"):
            if sub.is_symlink() or (sub.exists() and not sub.is_dir()):
                raise ImageError(f"--out {out_root}: {sub} is in the way (not a directory); remove it")
        failed = out_root / "last-failed.log"
        if failed.is_dir():
            raise ImageError(f"--out {out_root}: {failed} is a directory; remove it")
    except OSError as exc:
        raise ImageError(f"--out {out_root} cannot be used: {exc}") from exc


def profile_ref(prep: Prepared) -> str:
    """A profile file's absolute path, or a shipped profile's name: decided as load_profile decides (by the
    name's suffix), not by whether a file of that name happens to be in the working directory."""
    if is_profile_file(prep.request.profile):
        return str(Path(prep.request.profile).resolve())
    return prep.profile["name"]


def write_inputs(prep: Prepared, stage: Path, started: str | None = None) -> Path:
    """The variables file for packer plus the two JSON files it hands to ansible and to validate. `started`
    (the manifest's build.started) tags what an amazon-ebs build makes on AWS, so that an AMI, its snapshots
    or a build instance left running can be told apart and matched to its manifest."""
    stage = stage.resolve()  # packer runs in the checkout, not in the caller's directory (--out rel)
    ansible_vars = {
        "ktinfra_profile": prep.profile["name"],
        # kt_python_env takes a shipped profile's name or a controller path to a profile file
        "ktinfra_profile_ref": profile_ref(prep),
        "ktinfra_env_roles": sorted({env["role"] for env in prep.envs.values()}),
        "ktinfra_env_root": spec.ENV_ROOT,
        "ktinfra_image_envs": prep.envs,
        "ktinfra_wheelhouse": WHEELHOUSE_IN_IMAGE,
    }
    build_spec = {"profile": prep.profile["name"], "envs": prep.envs}
    (stage / "ansible-vars.json").write_text(json.dumps(ansible_vars, indent=1))
    (stage / "build-spec.json").write_text(json.dumps(build_spec, indent=1))
    variables = prep.variables | {
        "output_dir": str(stage),
        "playbook_file": str(prep.request.playbook.resolve()),
        "ansible_vars_file": str(stage / "ansible-vars.json"),
        "build_spec_file": str(stage / "build-spec.json"),
    }
    if started and prep.request.source == "amazon-ebs":
        variables["aws_tags"] = prep.variables["aws_tags"] | {"ktinfra.build-started": started}
    var_file = stage / "variables.pkrvars.json"
    var_file.write_text(json.dumps(variables, indent=1))
    return var_file


def run(req: BuildRequest, on_line: Callable[[str], None] | None = None, ec2=None) -> dict:
    prep = prepare(req, ec2=ec2)
    # a refused build writes nothing, not even last-failed.log (that one stays the last build that ran)
    ensure_available(req.packer)
    # SIGTERM (CI's stop) unwinds as Ctrl-C does: packer runs in a session of its own, which a signal to
    # ktinfra's group does not reach, so it is stopped here, and the stage and packer's TMPDIR are removed
    with sigterm_unwinds():
        return _run_in_stage(req, prep, on_line, ec2)


def _run_in_stage(req: BuildRequest, prep: Prepared, on_line: Callable[[str], None] | None, ec2) -> dict:
    final = req.out_root / prep.name
    stage = req.out_root / f"{prep.name}.partial"
    tmpdir = None
    try:
        try:
            recover_publish(stage, final)
            shutil.rmtree(stage, ignore_errors=True)
            stage.mkdir(parents=True)
            if req.source == "docker":
                req.wheelhouse.mkdir(parents=True, exist_ok=True)
            wheels_before = len(list(req.wheelhouse.glob("*"))) if req.source == "docker" else None
            # packer's TMPDIR (its ansible provisioner's inventory and SSH private key, which an interrupted
            # packer leaves), removed when the build ends however it ends. Not in the stage: packer's plugins
            # listen on unix sockets there, whose path may not exceed 107 bytes (a long --out crashed packer)
            tmpdir = Path(tempfile.mkdtemp(prefix="ktinfra-packer-"))
            log = (stage / "build.log").open("w")  # last: nothing after it can fail and leave it open
        except BaseException as exc:
            shutil.rmtree(stage, ignore_errors=True)
            if isinstance(exc, OSError):
                raise ImageError(f"cannot set up the build in {stage}: {exc}") from exc
            raise
        return _run_packer(req, prep, stage, final, log, wheels_before, tmpdir, on_line, ec2)
    finally:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


def _run_packer(
    req: BuildRequest,
    prep: Prepared,
    stage: Path,
    final: Path,
    log,
    wheels_before: int | None,
    tmpdir: Path,
    on_line: Callable[[str], None] | None,
    ec2=None,
) -> dict:
    """packer validate + build in `stage`, the manifest, the AMI's IMDSv2 requirement, and the stage
    published at `final`."""

    def line(text: str) -> None:
        if log.closed:  # sh's reader thread may flush a last chunk after an interrupted build
            return
        log.write(text + "\n")
        log.flush()
        if on_line:
            on_line(text)

    started, t0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), time.monotonic()
    try:
        packer = Packer(
            TEMPLATE,
            var_file=write_inputs(prep, stage, started),
            only=[f"{req.source}.kt"],
            exec_path=req.packer,
            cwd=REPO_ROOT,
            on_line=line,
            tmpdir=tmpdir,
        )
        version = packer.version()
        checked = packer.validate()
        if not checked.ok:
            raise ImageError(f"packer validate failed:\n{checked.message}")
        packer.build()
        duration = time.monotonic() - t0
        try:
            result = _manifest(prep, stage, started, duration, version, wheels_before)
        except ImageError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ImageError(_unusable(prep, exc)) from exc
        imds_error = _require_imds_v2(prep, result, ec2, line)
    except BaseException as exc:
        with contextlib.suppress(OSError, ValueError):  # the log says why the build stopped
            log.write(f"error: {(str(exc).splitlines() or [type(exc).__name__])[0]}\n")
        if req.source == "docker":
            try:
                dockercli.remove_container(prep.variables["docker_container_name"])
            except ImageError as left:  # said, but never in place of the build's own error
                with contextlib.suppress(OSError, ValueError):
                    log.write(f"warning: {left}\n")
                if on_line:
                    on_line(f"warning: {left}")
        log.close()
        with contextlib.suppress(OSError):  # never hide the build's own error behind this one
            shutil.copy(stage / "build.log", req.out_root / "last-failed.log")
        shutil.rmtree(stage, ignore_errors=True)
        raise
    log.close()
    result["build"]["output_dir"] = str(final)
    try:
        left = publish(stage, final, json.dumps(result, indent=1) + "\n")
    except OSError as exc:
        before = "holds the previous build" if (final / "manifest.json").is_file() else "holds no build now"
        raise ImageError(
            f"the image was built, but its output could not be put at {final} ({exc.strerror or exc}); "
            f"manifest and log are in {stage}, and {final} {before}"
            + (f". Also: {imds_error}" if imds_error else "")
        ) from exc
    if left is not None:
        if on_line:  # the build log is closed by now
            on_line(f"warning: the previous build could not be removed entirely; it is left in {left}")
        result["build"]["previous_left_in"] = str(left)
    if imds_error:  # the AMI exists and has its manifest: said after the build is in place
        raise ImageError(f"{imds_error}; the build's manifest is {final / 'manifest.json'}")
    return result


def _require_imds_v2(prep: Prepared, result: dict, ec2, line: Callable[[str], None]) -> str | None:
    """--imds-v2 (amazon-ebs): the new AMI's ImdsSupport set to v2.0, recorded in the manifest's
    image.imds_support (null when not set). Returns why it failed (the build itself stands)."""
    req = prep.request
    if req.source != "amazon-ebs" or not req.imds_v2:
        return None
    ami = result["image"]["id"]
    try:
        aws.require_imds_v2(ec2, ami, req.region)
    except ImageError as exc:
        line(f"AMI {ami}: setting ImdsSupport to v2.0 failed")  # the error follows
        return str(exc)
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C, or SIGTERM (sigterm_unwinds)
        # the AMI exists: before, the interrupt went on to the build's cleanup, which removed the stage and
        # with it the only record of the AMI's id; now the build is put in place and the command fails
        line(f"AMI {ami}: interrupted while setting ImdsSupport to v2.0")
        return (
            f"interrupted while setting AMI {ami}'s ImdsSupport to v2.0: the AMI was built and exists in "
            f"{req.region}; whether the setting took is unknown (`aws ec2 describe-image-attribute --region "
            f"{req.region} --image-id {ami} --attribute imdsSupport`); set it with `aws ec2 "
            f"modify-image-attribute --region {req.region} --image-id {ami} --imds-support v2.0`"
        )
    result["image"]["imds_support"] = "v2.0"
    line(f"AMI {ami}: ImdsSupport set to v2.0 (instances started from it require IMDSv2)")
    return None


def publish(stage: Path, final: Path, manifest_text: str) -> Path | None:
    """Make the finished stage directory, its manifest written first, the output at `final`: the previous
    build is renamed aside (a rename, which files a user cannot delete do not stop) and put back if the new
    one cannot take its place, so `final` always holds one whole build with its manifest. Ctrl-C and SIGTERM
    wait until both renames are done; a build killed between them is put in place by recover_publish.
    Returns where the previous build is left when it could not be removed entirely (image list and verify
    pass over it)."""
    tmp = stage / ".manifest.json.tmp"
    tmp.write_text(manifest_text)
    os.replace(tmp, stage / "manifest.json")
    old = None
    with _signals_deferred():
        if os.path.lexists(final):
            old = final.with_name(f"{OLD_PREFIX.format(final.name)}{secrets.token_hex(4)}")
            os.replace(final, old)
        try:
            os.replace(stage, final)
        except OSError:
            if old is not None:
                os.replace(old, final)
            raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
        if os.path.lexists(old):
            return old
    return None


OLD_PREFIX = ".{}.old-"  # publish's name for the previous build while the new one takes its place


def recover_publish(stage: Path, final: Path) -> None:
    """A publish killed between its renames left no build at `final`: the new one in `stage` (finished:
    publish writes its manifest first) or only the previous one, renamed aside. The newest whole build is
    put back at `final` before the next build clears the stage."""
    if os.path.lexists(final):
        return
    aside = final.parent.glob(f"{OLD_PREFIX.format(final.name)}*")
    olds = sorted(
        (p for p in aside if (p / "manifest.json").is_file()),
        key=lambda p: (p / "manifest.json").stat().st_mtime,
    )
    if (stage / "manifest.json").is_file() and not stage.is_symlink():
        os.replace(stage, final)
    elif olds:
        os.replace(olds.pop(), final)
    for left in olds:
        shutil.rmtree(left, ignore_errors=True)


@contextlib.contextmanager
def _signals_deferred():
    """SIGINT and SIGTERM that arrive inside are acted on (as their handlers would) once it is left."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: caught.append(signum)) for sig in _DEFERRED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for signum in caught[:1]:
        handler = previous[signum]
        if callable(handler):
            handler(signum, None)
        elif handler == signal.SIG_DFL:
            signal.raise_signal(signum)


_DEFERRED = (signal.SIGINT, signal.SIGTERM)


def _unusable(prep: Prepared, exc: Exception) -> str:
    """Why packer's packages.json or packer-manifest.json cannot make a manifest, and what packer left."""
    if isinstance(exc, OSError) and exc.filename:
        missing = isinstance(exc, FileNotFoundError)
        why = f"{Path(exc.filename).name} {'is missing' if missing else exc.strerror}"
    elif isinstance(exc, KeyError):
        why = f"a file lacks the key {exc}"
    else:
        why = f"{type(exc).__name__}: {exc}"
    if prep.request.source == "docker":
        ref = f"{prep.request.repository}:{prep.variables['docker_tag']}"
        left = f"docker image {ref} was tagged without a manifest (build again, or `docker rmi {ref}`)"
    else:
        left = f"the AMI packer registered in {prep.request.region} has no manifest (see last-failed.log)"
    return f"the build finished but its outputs are unusable: {why}; {left}"


def _manifest(
    prep: Prepared, stage: Path, started: str, duration: float, version: str, wheels_before
) -> dict:
    packages = json.loads((stage / "packages.json").read_text())
    artifact = manifest.packer_artifact(stage / "packer-manifest.json")
    req = prep.request
    if req.source == "docker":
        ref = f"{req.repository}:{prep.variables['docker_tag']}"
        info = dockercli.image_info(ref)
        if info is None:
            raise ImageError(f"packer reported success but {ref} is not in docker")
        image = {"source": "docker", "id": info["id"], "tag": ref, "base": prep.extra["base"]}
        sizes = {
            "image_bytes": info["size_bytes"],
            "base_bytes": prep.extra["base"]["size_bytes"],
            "added_bytes": info["size_bytes"] - prep.extra["base"]["size_bytes"],
        }
        extra = {"wheelhouse": str(req.wheelhouse), "wheelhouse_files_before": wheels_before}
    else:
        image = {
            "source": "amazon-ebs",
            "id": manifest.ami_in_region(artifact["artifact_id"], req.region),
            "region": req.region,
            "base": prep.extra["base"],
            "instance": prep.extra["instance"],
            "imds_support": None,  # "v2.0" once _require_imds_v2 has set it
            "aws_tags": prep.variables["aws_tags"],  # --aws-tag
        }
        sizes = {"root_volume_gb": prep.variables["aws_root_volume_gb"]}
        extra = {"imds_v2": req.imds_v2}
    return manifest.build_manifest(
        image=image,
        profile=prep.profile,
        profile_ref=profile_ref(prep),
        packages=packages,
        sizes=sizes,
        started=started,
        duration_s=duration,
        packer_version=version,
        git=prep.extra["git"],
        extra=extra,
        roles={name: env["role"] for name, env in prep.envs.items()},
    )
