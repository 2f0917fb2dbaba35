"""Fresh-eyes review: an image reference that reads as a docker option.

`dockercli.image_info` ran `docker image inspect REF`; with `--base-image=--help` (or `image verify --
--help`) docker printed its usage with exit 0 and `image build` died with a JSONDecodeError traceback. The
reference now follows `--`, so docker looks it up as a name and the build is refused with one error line
before anything is written. Needs the docker daemon (`make image-test` runs docker-ready first).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from ktinfra.image import REPO_ROOT, dockercli


def _ktinfra(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60
    )


@pytest.mark.parametrize("ref", ["--help", "-h", "--format={{.Id}}"])
def test_an_option_like_ref_is_no_image(ref):
    assert dockercli.image_info(ref) is None


def test_option_like_base_image_is_refused_with_one_line(tmp_path):
    proc = _ktinfra(
        "image",
        "build",
        "--base-image=--help",
        "--out",
        str(tmp_path / "out"),
        "--wheelhouse",
        str(tmp_path / "wh"),
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "JSONDecodeError" not in proc.stderr
    assert "base image --help is not here" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_option_like_verify_image_is_refused(tmp_path):
    proc = _ktinfra("image", "verify", "--out", str(tmp_path), "--", "--help")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no docker image '--help'" in proc.stderr


def test_a_real_image_is_still_found():
    info = dockercli.image_info("ktinfra/debian12-systemd:latest")
    assert info is not None and info["id"].startswith("sha256:")
