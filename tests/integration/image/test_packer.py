"""The template and the python-packer adapter against the real packer binary.

The `test_wrapper_*` tests pin down the python-packer 0.1.2 defects the adapter works around: if one starts
failing, the wrapper (or sh, or packer) changed and the adapter's workaround can go.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import packer as python_packer
import pytest
import sh

from ktinfra.image import REPO_ROOT, TEMPLATE, ImageError, build
from ktinfra.image.packer_adapter import Packer

ENV = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PACKER_NO_COLOR": "1"}


def test_version_is_read():
    assert Packer(TEMPLATE).version().count(".") == 2


@pytest.mark.parametrize("source", ["docker.kt", "amazon-ebs.kt"])
def test_template_validates_for_each_source(template_vars, source):
    result = Packer(TEMPLATE, var_file=template_vars, only=[source], cwd=REPO_ROOT).validate()
    assert result.ok, result.message


@pytest.mark.parametrize("profile", ["kt-0.7", "a" * 106, "kt-0.7+cu128", "a" * 107])
def test_ktinfra_and_packer_validate_agree_on_ami_names(write_template_vars, profile):
    """The real packer checks the rendered ami_name as EC2 does; ktinfra's own check, which refuses a build
    before the AWS look-ups and packer, must give the same verdict."""
    var_file = write_template_vars(profile=profile, aws_ami_name=build.AMI_NAME_PREFIX)
    result = Packer(TEMPLATE, var_file=var_file, only=["amazon-ebs.kt"], cwd=REPO_ROOT).validate()
    try:
        build._check_ami_name(profile)
        ours = True
    except ImageError:
        ours = False
    assert result.ok == ours, result.message
    if not ours:
        assert "ami_name" in result.message or "AMIName" in result.message


def test_templates_are_packer_formatted():
    proc = subprocess.run(["packer", "fmt", "-check", str(TEMPLATE.parent)], capture_output=True, text=True)
    assert proc.returncode == 0, f"run `packer fmt images/`: {proc.stdout}"


def test_validate_failure_gives_packer_message():
    result = Packer(TEMPLATE, cwd=REPO_ROOT).validate()
    assert not result.ok
    assert 'Unset variable "profile"' in result.message


def test_validate_failure_keeps_every_error(tmp_path):
    # output goes to the line sinks (not to sh's captured stdout): the message was the last 30 lines only,
    # so packer's first errors were cut off when a template had more than six
    names = [f"v{i:02d}" for i in range(12)]
    template = tmp_path / "t.pkr.hcl"
    template.write_text(
        "".join(f'variable "{n}" {{\n  type = string\n}}\n' for n in names)
        + 'source "null" "x" {\n  communicator = "none"\n}\n'
        + 'build {\n  sources = ["source.null.x"]\n  provisioner "shell-local" {\n'
        + f"    inline = [{', '.join(f'var.{n}' for n in names)}]\n  }}\n}}\n"
    )
    result = Packer(template, cwd=tmp_path).validate()
    assert not result.ok
    assert [n for n in names if f'Unset variable "{n}"' not in result.message] == []


def test_inspect_lists_sources_provisioners_and_variables(template_vars):
    info = Packer(TEMPLATE, var_file=template_vars).inspect()
    assert info["sources"] == ["docker.kt", "amazon-ebs.kt"]
    assert info["provisioners"] == ["ansible", "file", "file", "shell", "file", "shell"]
    assert info["post-processors"] == ["docker-tag", "manifest"]
    assert info["variables"]["docker_base_image"] == "ktinfra/debian12-systemd:latest"


def test_required_plugins_file_is_for_current_packer_only():
    proc = subprocess.run(
        ["packer", "validate", str(TEMPLATE.parent / "required-plugins.pkr.hcl")],
        capture_output=True,
        text=True,
        env=ENV,
    )
    version = subprocess.run(["packer", "version"], capture_output=True, text=True).stdout
    if "v1.6." in version:
        assert proc.returncode != 0 and "required_plugins" in proc.stdout + proc.stderr
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_wrapper_inspect_breaks_on_bytes(template_vars):
    w = python_packer.Packer(str(TEMPLATE), var_file=str(template_vars))
    w.packer = w.packer.bake(_env=ENV)
    with pytest.raises(TypeError, match="bytes-like"):
        w.inspect()


def test_wrapper_validate_error_path_raises(template_vars):
    w = python_packer.Packer(str(TEMPLATE))
    w.packer = w.packer.bake(_env=ENV)
    with pytest.raises(AttributeError, match="message") as info:
        w.validate()
    assert isinstance(info.value.__context__, sh.ErrorReturnCode)


def test_wrapper_parallel_flag_rejected(template_vars):
    w = python_packer.Packer(str(TEMPLATE), var_file=str(template_vars), only=["nothing.kt"])
    w.packer = w.packer.bake(_env=ENV)
    with pytest.raises(sh.ErrorReturnCode) as info:
        w.build(parallel=True)
    assert b"Usage: packer build" in info.value.stdout + info.value.stderr


def test_wrapper_callbacks_break_on_python_311():
    if sys.version_info < (3, 11):
        pytest.skip("inspect.getargspec exists before Python 3.11")
    w = python_packer.Packer(str(TEMPLATE), out_iter=lambda line: None)
    with pytest.raises(AttributeError, match="getargspec"):
        w.version()
