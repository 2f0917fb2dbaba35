"""Spec for images/scripts/validate.py over this host's own python: every installed torch, triton, numpy,
nvidia-*, kt-kernel and gguf distribution pinned at the version it has, so the image's validate step (pins,
imports from top_level.txt or RECORD, the not-checked list) runs on real CUDA-era wheels.

usage: python3 scripts/device/validate_spec.py OUT_SPEC_JSON
"""

from __future__ import annotations

import importlib.metadata as md
import json
import re
import sys

WANTED = re.compile(r"^(torch|triton|numpy|kt-kernel|gguf|nvidia-.*)$")


def main(out: str) -> int:
    pins = sorted(
        {
            f"{d.metadata['Name']}=={d.version}"
            for d in md.distributions()
            if d.metadata["Name"] and WANTED.match(re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower())
        }
    )
    spec = {"profile": "device-host", "envs": {"system": {"python": sys.executable, "pins": pins}}}
    with open(out, "w") as f:
        json.dump(spec, f, indent=1)
    print(f"{len(pins)} pins: {' '.join(pins)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
