"""Image integration tests: the real packer binary and a real docker build (`make image-test`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ktinfra.image import REPO_ROOT, build, dockercli


@pytest.fixture(scope="session", autouse=True)
def _needs_packer():
    if not shutil.which("packer"):
        pytest.fail("packer is not installed: `make image-deps` installs it (apt-get install packer)")


@pytest.fixture
def write_template_vars(tmp_path):
    """Writes a variables file as `ktinfra image build` writes it, for validating the template; the call's
    keywords replace or add variables (profile=..., aws_ami_name=...)."""

    def write(**more) -> Path:
        (tmp_path / "extra.json").write_text("{}")
        variables = {
            "profile": "smoke",
            "output_dir": str(tmp_path),
            "playbook_file": str(REPO_ROOT / "playbooks" / "image.yml"),
            "ansible_vars_file": str(tmp_path / "extra.json"),
            "build_spec_file": str(tmp_path / "extra.json"),
            "wheelhouse": build.WHEELHOUSE_IN_IMAGE,
            "docker_systemd_run_args": dockercli.SYSTEMD_RUN_ARGS,
        } | more
        path = tmp_path / "v.pkrvars.json"
        path.write_text(json.dumps(variables))
        return path

    return write


@pytest.fixture
def template_vars(write_template_vars) -> Path:
    return write_template_vars()
