"""Image builds: Packer templates in images/, driven by `ktinfra image build|verify|list`."""

from __future__ import annotations

from pathlib import Path


class ImageError(ValueError):
    """Bad input or a failed build step, with a message meant for the user."""


REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = REPO_ROOT / "images" / "kt.pkr.hcl"
OUT_ROOT = REPO_ROOT / "out" / "image"  # build directories: build --out, verify/list --out
SOURCES = ("docker", "amazon-ebs")
