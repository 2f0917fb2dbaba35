"""The amazon-ebs tags of images/kt.pkr.hcl as the real packer evaluates them (`packer console`), and the
IMDSv2 setting packer 1.6.6 cannot take. tests/unit/test_image_review_aws_tags.py checks that the source
uses these locals for its AMI, snapshot, instance and volume tags, and that ktinfra passes the build time."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ktinfra.image import REPO_ROOT, TEMPLATE, build
from ktinfra.image.packer_adapter import Packer

ENV = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PACKER_NO_COLOR": "1"}
LABELS = {"ktinfra.profile": "smoke", "ktinfra.version": "0.1.0", "ktinfra.revision": "abc123"}
STARTED = {"ktinfra.build-started": "2026-12-02T02:03:38+00:00"}


def evaluated(var_file: Path, expression: str) -> dict:
    proc = subprocess.run(
        ["packer", "console", f"-var-file={var_file}", str(TEMPLATE)],
        input=f"jsonencode({expression})\n",
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def ami_vars(write_template_vars, **more) -> Path:
    return write_template_vars(aws_ami_name=build.AMI_NAME_PREFIX, aws_ami_envs="-inference", **more)


def test_the_ami_and_its_snapshots_get_the_labels_the_build_time_and_the_ami_name(write_template_vars):
    var_file = ami_vars(write_template_vars, labels=LABELS, aws_tags=STARTED)
    tags = evaluated(var_file, "local.aws_tags")
    assert tags == {"Name": "ktinfra-kt-smoke-inference", **LABELS, **STARTED}


def test_the_build_instance_and_its_volumes_get_them_too_under_their_own_name(write_template_vars):
    var_file = ami_vars(write_template_vars, labels=LABELS, aws_tags=STARTED)
    tags = evaluated(var_file, "local.aws_build_tags")
    assert tags == {"Name": "ktinfra-kt-smoke-inference-build", **LABELS, **STARTED}


def test_the_tags_evaluate_without_labels_or_aws_tags(write_template_vars):
    # packer 1.6.6's merge() panics ("must not call MapVal with empty map") when every map it merges is empty
    var_file = ami_vars(write_template_vars)
    assert evaluated(var_file, "local.aws_tags") == {"Name": "ktinfra-kt-smoke-inference"}
    assert evaluated(var_file, "local.aws_build_tags") == {"Name": "ktinfra-kt-smoke-inference-build"}


def test_aws_tags_may_name_the_resources(write_template_vars):
    var_file = ami_vars(write_template_vars, labels=LABELS, aws_tags={"Name": "mine", "team": "infra"})
    assert evaluated(var_file, "local.aws_build_tags") == {"Name": "mine", "team": "infra", **LABELS}


def test_the_tagged_amazon_source_validates(write_template_vars):
    var_file = ami_vars(write_template_vars, labels=LABELS, aws_tags=STARTED)
    result = Packer(TEMPLATE, var_file=var_file, only=["amazon-ebs.kt"], cwd=REPO_ROOT).validate()
    assert result.ok, result.message


IMDSV2 = """  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }
"""


def test_imdsv2_on_the_build_instance_needs_a_current_amazon_plugin(tmp_path, write_template_vars):
    """Pins down why the template has no metadata_options block: packer 1.6.6 refuses the whole template
    with it. Where a current packer validates it, the block can go into images/kt.pkr.hcl."""
    images = tmp_path / "images"
    shutil.copytree(TEMPLATE.parent, images)
    text = TEMPLATE.read_text()
    anchor = "  run_volume_tags = local.aws_build_tags\n"
    assert anchor in text
    (images / TEMPLATE.name).write_text(text.replace(anchor, anchor + IMDSV2))
    var_file = write_template_vars()
    packer = Packer(images / TEMPLATE.name, var_file=var_file, only=["amazon-ebs.kt"], cwd=REPO_ROOT)
    result = packer.validate()
    version = subprocess.run(["packer", "version"], capture_output=True, text=True, env=ENV).stdout
    if "v1.6." in version:
        assert not result.ok and 'Blocks of type "metadata_options" are not expected here' in result.message
    else:
        assert result.ok, result.message
