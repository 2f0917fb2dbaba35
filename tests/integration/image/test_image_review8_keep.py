"""A misspelt item of what the image build keeps is refused before anything is removed.

cleanup.sh read KTINFRA_KEEP by matching each known word and passed any other over in silence: `model` or
`token` (for models, tokens) kept nothing, and the weights and hub tokens the build was asked to keep were
deleted from the image. The template took any cleanup_keep too (and any aws_root_volume_gb, 0 and 2.5
included), so a packer run from the command line found out at the end of the build, or from EC2. Now
`packer validate` refuses both, and cleanup.sh refuses an unknown item with exit 2 before its first removal.
The script runs in a throwaway container of the local base image (it deletes system files)."""

from __future__ import annotations

import os
import subprocess

import pytest

from ktinfra.image import REPO_ROOT, TEMPLATE
from ktinfra.image.packer_adapter import Packer

BASE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")
SCRIPT = REPO_ROOT / "images" / "scripts" / "cleanup.sh"
SEEDED = [
    "/models/m/w.safetensors",
    "/root/.cache/huggingface/token",
    "/root/.bash_history",
    "/etc/machine-id",
]


def run_cleanup(keep: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """cleanup.sh with KTINFRA_KEEP=keep over seeded files: its result and the seeded files still there."""
    seed = " && ".join(f"mkdir -p {os.path.dirname(p)} && echo x > {p}" for p in SEEDED)
    report = "for f in " + " ".join(SEEDED) + '; do [ -s "$f" ] && echo "left: $f"; done; true'
    proc = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "/bin/sh", "-e", f"KTINFRA_KEEP={keep}",
         "-v", f"{SCRIPT}:/cleanup.sh:ro", BASE,
         "-c", f"{seed} && {{ sh /cleanup.sh; echo \"rc=$?\"; }} && {report}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc, [
        line.removeprefix("left: ") for line in proc.stdout.splitlines() if line.startswith("left: ")
    ]


@pytest.fixture(scope="module")
def base_image():
    if subprocess.run(["docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        pytest.fail(f"base image {BASE} missing: `make docker-ready` builds it")


@pytest.mark.parametrize("keep", ["model", "models,token", "*"])
def test_cleanup_refuses_an_unknown_item_before_removing_anything(base_image, keep):
    proc, left = run_cleanup(keep)
    assert "rc=2" in proc.stdout, proc.stdout
    bad = keep.split(",")[-1]
    assert f"KTINFRA_KEEP names '{bad}'" in proc.stderr, proc.stderr
    assert left == SEEDED


def test_cleanup_keeps_what_is_asked_and_removes_the_rest(base_image):
    proc, left = run_cleanup("models,tokens")
    assert "rc=0" in proc.stdout, proc.stderr
    assert left == ["/models/m/w.safetensors", "/root/.cache/huggingface/token"]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("cleanup_keep", "model", "comma list of wheelhouse, models and tokens"),
        ("cleanup_keep", "wheelhouse,token", "comma list of wheelhouse, models and tokens"),
        ("aws_root_volume_gb", 0, "whole number of GB"),
        ("aws_root_volume_gb", 2.5, "whole number of GB"),
    ],
)
def test_packer_validate_refuses_a_bad_value(write_template_vars, variable, value, message):
    var_file = write_template_vars(**{variable: value})
    result = Packer(TEMPLATE, var_file=var_file, cwd=REPO_ROOT).validate()
    assert not result.ok
    assert message in " ".join(result.message.split()), result.message


@pytest.mark.parametrize(
    ("variable", "value"),
    [("cleanup_keep", ""), ("cleanup_keep", "wheelhouse,models,tokens"), ("aws_root_volume_gb", 75)],
)
def test_packer_validate_takes_what_ktinfra_writes(write_template_vars, variable, value):
    var_file = write_template_vars(**{variable: value})
    result = Packer(TEMPLATE, var_file=var_file, cwd=REPO_ROOT).validate()
    assert result.ok, result.message
