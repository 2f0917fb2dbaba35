"""What an image build installs: the stack profile turned into per-env specs (python, pins, sizes)."""

from __future__ import annotations

import math

from ktinfra.image import ImageError
from ktinfra.profiles import (
    UnknownProfileError,
    env_spec,
    image_settings,
    load_profile,
    shared_download_bytes,
    wheel_version,
)

ENV_ROOT = "/opt/kt/envs"  # kt_python_env_root default
# Root volume of an AMI: the Deep Learning base AMI's OS + driver + CUDA, plus what the envs need.
BASE_VOLUME_GB = 40
# Per env when the profile does not say (torch 2.9 + nvidia-* wheels ~8 GB installed, sglang/llamafactory).
PER_ENV_VOLUME_GB = 25
HEADROOM = 1.25


def load(profile: str) -> dict:
    """A profile by name (ktinfra/data/profiles) or by path to a YAML file of the same shape, read and
    checked by profiles.load_profile (YAML, name, generation, python, the shape of envs)."""
    try:
        data = load_profile(profile)
    except UnknownProfileError as exc:
        raise ImageError(str(exc)) from exc
    if not data.get("envs"):
        raise ImageError(f"profile {profile} has no envs: nothing to bake")
    return data


def env_specs(profile: dict, env_root: str = ENV_ROOT, only: list[str] | None = None) -> dict:
    """{env name: {role, prefix, python, pins}} for the envs of the profile (all, or those in `only`).
    Every name in `only` must be an env's role or name: a typo among good names would bake fewer envs."""
    if only:
        known = {k for role, env in profile["envs"].items() for k in (role, env.get("name", role))}
        unknown = [name for name in dict.fromkeys(only) if name not in known]
        if unknown:
            raise ImageError(
                f"no env of profile {profile['name']} matches {unknown}; it has {list(profile['envs'])}"
            )
    specs = {}
    for role, env in profile["envs"].items():
        name = env.get("name", role)
        if only and role not in only and name not in only:
            continue
        pins = env_pins(env)
        if not pins:
            continue
        prefix = f"{env_root}/{name}"
        specs[name] = {"role": role, "prefix": prefix, "python": f"{prefix}/bin/python", "pins": pins}
    if not specs:
        which = f"env {', '.join(only)} of " if only else ""
        raise ImageError(f"{which}profile {profile['name']} pins no packages: nothing to bake")
    return specs


def bake_problems(profile: dict, envs: dict) -> list[str]:
    """What playbooks/image.yml cannot install into the chosen envs: it makes venvs (no conda patches) and
    has no way to hand over the sha256 pins of wheel files the profile leaves unpinned."""
    problems = []
    for spec in envs.values():
        env = profile["envs"][spec["role"]]
        patches = [package for patch in env.get("conda_patches") or [] for package in patch["packages"]]
        if patches:
            problems.append(
                f"env {env.get('name', spec['role'])} is patched with conda ({', '.join(patches)})"
            )
        unpinned = [w["name"] for w in env.get("wheels") or [] if not w.get("sha256")]
        if unpinned:
            problems.append(
                f"env {env.get('name', spec['role'])} has wheel files without sha256: {', '.join(unpinned)}"
            )
        native = [g["name"] for g in env.get("git") or [] if g.get("host_cpu")]
        if native:
            problems.append(
                f"env {env.get('name', spec['role'])} builds {', '.join(native)} from source for the CPU it "
                "is built on (host_cpu), so an image would carry the build machine's kernels"
            )
    return problems


def env_pins(env: dict) -> list[str]:
    """What validate checks for an env: its package pins, its wheel files as name==version (the version
    field of the wheel file name), and its git sources by name (any version)."""
    pins = list(env.get("packages") or [])
    for wheel in env.get("wheels") or []:
        try:
            version = wheel.get("version") or wheel_version(wheel["file"])
        except ValueError as exc:
            raise ImageError(f"wheel {wheel.get('name')}: {exc}") from exc
        pins.append(f"{wheel.get('name') or wheel['file'].split('-')[0]}=={version}")
    pins += [src["name"] for src in env.get("git") or []]
    return pins


def root_volume_gb(profile: dict, envs: dict, base_gb: int = BASE_VOLUME_GB) -> int:
    """image.root_volume_gb of the profile, else the base (BASE_VOLUME_GB, or the base AMI's larger root
    snapshot) plus each env's disk_bytes + download_bytes (the wheelhouse lives on the instance during the
    build; less what an env baked before it downloaded: download_shared_bytes), else a per-env default."""
    try:
        size = image_settings(profile, f"profile {profile.get('name')}").get("root_volume_gb")
    except UnknownProfileError as exc:
        raise ImageError(str(exc)) from exc
    if size is not None:
        return size
    needed = 0.0
    baked: list[dict] = []
    for env in envs.values():
        try:
            data = env_spec(profile, env["role"])
        except UnknownProfileError as exc:
            raise ImageError(str(exc)) from exc
        if data["disk_bytes"]:
            # the wheels an env baked before it downloaded are in the wheelhouse already
            download = data["download_bytes"] - shared_download_bytes(data, baked)
            needed += (data["disk_bytes"] + download) / 1e9
        else:
            needed += PER_ENV_VOLUME_GB
        baked.append(data)
    return max(base_gb, BASE_VOLUME_GB) + math.ceil(needed * HEADROOM)
