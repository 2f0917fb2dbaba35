"""The build manifest: what an image is, what is in it, and how it was made (JSON next to the build)."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

from ktinfra import __version__
from ktinfra.image import REPO_ROOT, ImageError

SCHEMA = 1
ENV_FIELDS = ("python", "python_version", "prefix", "size_bytes", "imports", "packages")
# pinned distributions whose imports validate.py could not check (no top_level.txt, no module in RECORD):
# {name: why}; null from a packages.json written before validate.py reported them (unknown, not none)
OPTIONAL_ENV_FIELDS = ("not_checked",)
_MISSING = object()


def read(path: Path) -> dict:
    """A manifest file's JSON object, or ImageError saying in one line why it cannot be used."""
    try:
        # NaN, Infinity and numbers too large for a float (1e999) are read as null: unknown
        data = json.loads(path.read_text(), parse_constant=_unknown, parse_float=_finite)
    except FileNotFoundError:
        raise ImageError(f"manifest {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImageError(f"manifest {path} cannot be read: {exc}") from exc
    except ValueError as exc:
        raise ImageError(f"manifest {path} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise ImageError(f"manifest {path} is not a usable manifest: it is nested too deeply") from None
    if not isinstance(data, dict):
        raise ImageError(f"manifest {path} is not a JSON object (it holds a {type(data).__name__})")
    return data


def _unknown(_constant: str) -> None:
    return None


def _finite(text: str) -> float | None:
    number = float(text)
    return number if math.isfinite(number) else None


def field(data: dict, dotted: str, kinds: tuple[type, ...], path: Path, default=_MISSING):
    """data["a"]["b"] for "a.b", checked to be one of `kinds`; ImageError naming the field if not.
    With a default, a missing (or null) last field gives the default instead. A non-finite number (NaN, an
    infinity) counts as null: unknown."""
    value = data
    parts = dotted.split(".")
    for i, key in enumerate(parts):
        if not isinstance(value, dict):
            state = "missing" if value is None else "not an object"
            raise ImageError(f"manifest {path}: {'.'.join(parts[:i])} is {state}")
        value = value.get(key)
    if isinstance(value, float) and not math.isfinite(value):
        value = None  # NaN or an infinity: unknown, as null
    if value is None and default is not _MISSING:
        return default
    if value is None or isinstance(value, bool) or not isinstance(value, kinds):
        names = " or ".join(dict.fromkeys(_KIND_NAMES.get(k, k.__name__) for k in kinds))
        raise ImageError(f"manifest {path}: {dotted} is {'missing' if value is None else 'not a ' + names}")
    return value


_KIND_NAMES = {str: "string", dict: "object", list: "list", int: "number", float: "number"}


def git_revision(root: Path = REPO_ROOT) -> dict:
    def git(*args: str) -> str | None:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else None

    rev = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"revision": rev, "dirty": bool(status) if status is not None else None}


def packer_artifact(packer_manifest: Path) -> dict:
    """The last build's artifact from packer's own manifest post-processor."""
    data = json.loads(packer_manifest.read_text())
    builds = data.get("builds") or []
    if not builds:
        raise ValueError(f"{packer_manifest} lists no build")
    last = next((b for b in builds if b.get("packer_run_uuid") == data.get("last_run_uuid")), builds[-1])
    return {"builder": last.get("builder_type"), "artifact_id": last.get("artifact_id")}


_AMI_ARTIFACT = re.compile(r"([a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}):(ami-[0-9a-f]{8}(?:[0-9a-f]{9})?)")


def ami_in_region(artifact_id, region: str) -> str:
    """The AMI id packer's amazon-ebs artifact names for `region`: its id is "REGION:AMI", one pair per region
    the AMI was copied to, comma-separated ("us-east-1:ami-1,eu-west-1:ami-2"). ValueError when it names
    none there (an id the manifest would carry as the image but no AMI)."""
    pairs = dict(
        m.groups()
        for part in str(artifact_id or "").split(",")
        if (m := _AMI_ARTIFACT.fullmatch(part.strip()))
    )
    if region not in pairs:
        raise ValueError(f"packer-manifest.json's artifact_id {artifact_id!r} names no AMI in {region}")
    return pairs[region]


def pinned_packages(packages: dict) -> list[dict]:
    return [
        {"env": env, **{k: p[k] for k in ("name", "version", "wheel", "sha256")}}
        for env, info in packages["envs"].items()
        for p in info["packages"]
        if p["pinned"]
    ]


def build_manifest(
    *,
    image: dict,
    profile: dict,
    profile_ref: str,
    packages: dict,
    sizes: dict,
    started: str,
    duration_s: float,
    packer_version: str,
    git: dict | None = None,
    extra: dict | None = None,
    roles: dict | None = None,
) -> dict:
    envs = {
        name: {
            # the profile's env key (inference, sft): env names are the profile's own choice
            "role": (roles or {}).get(name),
            **{k: info[k] for k in ENV_FIELDS},
            **{k: info.get(k) for k in OPTIONAL_ENV_FIELDS},
        }
        for name, info in packages["envs"].items()
    }
    return {
        "schema": SCHEMA,
        "image": image,
        # ref: the shipped profile's name or the profile file's absolute path (what --kt-profile takes)
        "profile": {
            "ref": profile_ref,
            **{k: profile.get(k) for k in ("name", "generation", "description", "python")},
        },
        "pins": pinned_packages(packages),
        "envs": envs,
        "sizes": {**sizes, "envs_bytes": {n: e["size_bytes"] for n, e in envs.items()}},
        "build": {
            "started": started,
            "duration_s": round(duration_s, 1),
            "packer_version": packer_version,
            "ktinfra_version": __version__,
            "git": git or git_revision(),
            **(extra or {}),
        },
    }
