"""`ktinfra image list`: builds that have a manifest, plus ktinfra-labelled docker images without one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ktinfra.image import dockercli


def builds(out_root: Path) -> list[dict]:
    rows, seen = [], set()
    for path in sorted(out_root.glob("*/manifest.json")):
        try:
            m = json.loads(path.read_text())
        except ValueError:
            continue
        img = m["image"]
        seen.add(img.get("id"))
        rows.append(
            {
                "image": img.get("tag") or img.get("id"),
                "id": img.get("id"),
                "source": img["source"],
                "profile": m["profile"]["name"],
                "size_bytes": m["sizes"].get("image_bytes"),
                "built": m["build"]["started"],
                "duration_s": m["build"]["duration_s"],
                "manifest": str(path),
            }
        )
    if shutil.which("docker"):
        dockercli.ensure_daemon()
        for img in dockercli.list_images("ktinfra.profile"):
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
                }
            )
    return rows
