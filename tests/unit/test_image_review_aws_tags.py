"""Fresh-eyes review of what an amazon-ebs build leaves on AWS: before, only the AMI was tagged (the labels),
so the build instance (packer's "Packer Builder"), its volumes and the AMI's snapshots, which EC2 gives none
of the AMI's tags, could not be found or billed by profile, and nothing tied them to the build's manifest.

The real packer evaluates the template's tag locals in tests/integration/image/test_packer_tags.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

from image_moto import DLAMI, publish_ami, stand_in_packer
from test_image_review_aws import REGION
from test_image_review_aws import ec2 as ec2  # noqa: F401  (moto's EC2 in REGION, the fixture)

from ktinfra.image import TEMPLATE, build

SMOKE = Path(__file__).parents[1] / "integration" / "image" / "smoke-profile.yaml"


def source_block(text: str, kind: str, name: str) -> str:
    """The body of `source "KIND" "NAME" { ... }`, nested blocks included (the braces of "${...}" and
    "{{...}}" strings are balanced, so plain counting finds the block's end)."""
    start = text.index(f'source "{kind}" "{name}" {{') + len(f'source "{kind}" "{name}" {{')
    depth = 1
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return text[start:end]
    raise ValueError(f"source {kind}.{name} is not closed")


def top_level_settings(body: str) -> dict[str, str]:
    """`key = value` lines of a block's own level (not those of its nested blocks)."""
    settings, depth = {}, 0
    for line in body.splitlines():
        m = re.match(r"\s*([a-z_]+)\s*=\s*(.+?)\s*$", line)
        if m and depth == 0:
            settings[m.group(1)] = m.group(2)
        depth += line.count("{") - line.count("}")
    return settings


def test_the_amazon_source_tags_the_ami_snapshots_instance_and_volumes_from_one_place():
    settings = top_level_settings(source_block(TEMPLATE.read_text(), "amazon-ebs", "kt"))
    assert settings["tags"] == settings["snapshot_tags"] == "local.aws_tags"
    assert settings["run_tags"] == settings["run_volume_tags"] == "local.aws_build_tags"


def test_an_ami_build_is_tagged_with_its_manifests_start_time(tmp_path, ec2, monkeypatch):
    publish_ami(REGION, "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00")
    # the AMI the build makes, which --imds-v2 (the default) sets ImdsSupport on
    publish_ami(REGION, "ami-0123456789abcdef0", "ktinfra-kt-smoke-1790000000", "2026-11-01T00:00:00")
    packer = stand_in_packer(tmp_path / "packer", [f"{REGION}:ami-0123456789abcdef0"])
    monkeypatch.setenv("FAKE_VARS_COPY", str(tmp_path / "vars.json"))
    req = build.BuildRequest(
        source="amazon-ebs", profile=str(SMOKE), region=REGION, out_root=tmp_path / "out", packer=str(packer)
    )
    result = build.run(req, ec2=ec2)
    variables = json.loads((tmp_path / "vars.json").read_text())
    assert variables["aws_tags"] == {"ktinfra.build-started": result["build"]["started"]}
    assert variables["labels"]["ktinfra.profile"] == "smoke"
