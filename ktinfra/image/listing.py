"""`ktinfra image list`: builds that have a manifest, plus ktinfra-labelled docker images without one."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path

from ktinfra.image import ImageError, dockercli, manifest

COLUMNS = ("image", "id", "source", "profile", "size_bytes", "built", "duration_s", "manifest")


def builds(out_root: Path, warn: Callable[[str], None] | None = None) -> list[dict]:
    """One row per build; a manifest that cannot be read or lacks what a row shows still gets a row, with
    every column but `manifest` null and `error` saying why (the other rows have error null). Docker images
    follow when docker answers; when its daemon does not, `warn` is told and the manifests' rows stand."""
    rows, seen = [], set()
    for path in sorted(out_root.glob("*/manifest.json")):
        if path.parent.name.startswith("."):  # a previous build publish() could not remove (.NAME.old-*)
            continue
        try:
            row = build_row(path)
        except ImageError as exc:
            rows.append({**dict.fromkeys(COLUMNS), "manifest": str(path), "error": str(exc)})
            continue
        seen.add(row["id"])
        rows.append(row)
    images = []
    if shutil.which("docker"):
        try:
            dockercli.ensure_daemon()
            images = dockercli.list_images("ktinfra.profile")
        except ImageError as exc:
            if warn:
                warn(f"docker images skipped: {exc}")
    for img in images:
        info = dockercli.image_info(img["ID"])
        if info is None or info["id"] in seen:
            continue
        seen.add(info["id"])
        rows.append(
            {
                "image": info["tags"][0] if info["tags"] else info["id"][7:19],
                "id": info["id"],
                "source": "docker",
                "profile": info["labels"].get("ktinfra.profile"),
                "size_bytes": info["size_bytes"],
                "built": info["created"],
                "duration_s": None,
                "manifest": None,
                "error": None,
            }
        )
    for row in rows:  # strict JSON out: a NaN or an infinity from anywhere is unknown
        row.update({k: None for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)})
    return rows


MAX_IMAGE_BYTES = 1 << 50  # 1 PiB
MAX_DURATION_S = 10**7  # 116 days


def _amount(data: dict, dotted: str, path: Path, high: float) -> float | None:
    """A size or duration: null when unknown, ImageError when negative or beyond any real build."""
    value = manifest.field(data, dotted, (int, float), path, default=None)
    if value is not None and not 0 <= value <= high:
        raise ImageError(f"manifest {path}: {dotted} is {'negative' if value < 0 else 'too large'}")
    return value


def build_row(path: Path) -> dict:
    """The row of one manifest; ImageError when the file is unreadable or a field the row shows is bad.
    An unknown size or duration (missing, null, NaN or an infinity) is null in the row."""
    m = manifest.read(path)
    image_id = manifest.field(m, "image.id", (str,), path)
    return {
        "image": manifest.field(m, "image.tag", (str,), path, default=None) or image_id,
        "id": image_id,
        "source": manifest.field(m, "image.source", (str,), path),
        "profile": manifest.field(m, "profile.name", (str,), path),
        "size_bytes": _amount(m, "sizes.image_bytes", path, MAX_IMAGE_BYTES),
        "built": manifest.field(m, "build.started", (str,), path),
        "duration_s": _amount(m, "build.duration_s", path, MAX_DURATION_S),
        "manifest": str(path),
        "error": None,
    }
