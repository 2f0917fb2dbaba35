"""Fresh-eyes review of the amazon-ebs source: the build instance's root volume against the base AMI's root
snapshot, read with boto3 from moto's EC2 (describe_images' BlockDeviceMappings, as AWS answers it).

EC2 launches an AMI on no root volume smaller than its root snapshot (InvalidBlockDeviceMapping). Before,
ktinfra sized the volume from the profile alone (the smoke profile's 30 GB, or 40 GB + the envs), so such a
base AMI failed only once packer had started and asked EC2 for the instance."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from image_moto import DLAMI, publish_ami, stand_in_packer
from moto import mock_aws

from ktinfra.image import ImageError, aws, build

SMOKE = Path(__file__).parents[1] / "integration" / "image" / "smoke-profile.yaml"  # image.root_volume_gb: 30
REGION = "eu-north-1"


@pytest.fixture
def ec2(monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION)


def _unsized(tmp_path: Path) -> Path:
    """The smoke profile without image.root_volume_gb: 40 GB + 1.25 x the envs' sizes."""
    text = SMOKE.read_text()
    assert "root_volume_gb: 30" in text
    site = tmp_path / "site.yaml"
    site.write_text(text.replace("root_volume_gb: 30", "root_volume_gb: null"))
    return site


def _req(tmp_path: Path, profile: Path, **kw) -> build.BuildRequest:
    return build.BuildRequest(
        source="amazon-ebs", profile=str(profile), region=REGION, out_root=tmp_path / "out", **kw
    )


def test_the_ami_lookup_reads_the_root_snapshot_size(ec2):
    publish_ami(REGION, "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00", root_gb=75)
    assert aws.find_source_ami(ec2, REGION)["root_snapshot_gb"] == 75
    assert aws.describe_ami(ec2, "ami-000000000000000d1")["root_snapshot_gb"] == 75


def test_a_profile_volume_smaller_than_the_base_snapshot_is_refused_before_packer(tmp_path, ec2):
    publish_ami(REGION, "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00", root_gb=75)
    calls = tmp_path / "packer-calls"
    packer = tmp_path / "packer"
    packer.write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho "Packer v1.6.6"\nexit 0\n')
    packer.chmod(0o755)
    with pytest.raises(ImageError) as info:
        build.run(_req(tmp_path, SMOKE, packer=str(packer)), ec2=ec2)
    assert str(info.value).startswith(
        "profile smoke: image.root_volume_gb is 30 GB, and the root snapshot of base AMI "
        "ami-000000000000000d1 (Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261001) "
        "is 75 GB"
    ), info.value
    assert "at least 75" in str(info.value)
    assert not calls.exists() and not (tmp_path / "out").exists()


def test_a_given_source_ami_is_checked_the_same_way(tmp_path, ec2):
    publish_ami(REGION, "ami-0000000000000ab12", "my base (Ubuntu 24.04)", "2026-10-01T00:00:00", root_gb=31)
    with pytest.raises(ImageError, match="is 30 GB, and the root snapshot of base AMI ami-0000000000000ab12"):
        build.prepare(_req(tmp_path, SMOKE, source_ami="ami-0000000000000ab12"), ec2=ec2)
    publish_ami(REGION, "ami-0000000000000ab13", "my base (Ubuntu 24.04)", "2026-10-01T00:00:00", root_gb=30)
    prep = build.prepare(_req(tmp_path, SMOKE, source_ami="ami-0000000000000ab13"), ec2=ec2)
    assert prep.variables["aws_root_volume_gb"] == 30  # equal to the snapshot: EC2 takes it


def test_a_computed_volume_starts_from_a_larger_snapshot(tmp_path, ec2):
    site = _unsized(tmp_path)
    publish_ami(REGION, "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00", root_gb=20)
    small = build.prepare(_req(tmp_path, site), ec2=ec2).variables["aws_root_volume_gb"]
    envs_gb = small - 40  # the documented 40 GB base + the envs
    assert envs_gb > 0
    publish_ami(REGION, "ami-000000000000000d2", DLAMI.format("20261101"), "2026-11-01T00:00:00", root_gb=75)
    prep = build.prepare(_req(tmp_path, site), ec2=ec2)
    assert prep.variables["aws_source_ami"] == "ami-000000000000000d2"
    assert prep.variables["aws_root_volume_gb"] == 75 + envs_gb  # was 40 + envs_gb: below the snapshot


def test_an_ami_whose_size_is_not_said_keeps_the_profile_volume(tmp_path):
    image = {"RootDeviceName": "/dev/xvda", "BlockDeviceMappings": [{"DeviceName": "/dev/sdb", "Ebs": {}}]}
    assert aws.root_snapshot_gb(image, "/dev/xvda") is None
    image["BlockDeviceMappings"].append({"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 8}})
    assert aws.root_snapshot_gb(image, "/dev/xvda") == 8
    profile = build.spec.load(str(SMOKE))
    envs = build.spec.env_specs(profile)
    ami = {"id": "ami-1", "name": "x", "root_snapshot_gb": None}
    assert build._root_volume_gb(profile, envs, ami) == 30


# packer's manifest post-processor: an amazon-ebs artifact_id is "REGION:AMI", one pair per region, joined by
# commas. Before, the manifest took everything after the first ':' as the AMI id ("ami-1,us-east-1:ami-2")
# and the text before it as the region, and a missing or odd artifact_id made an image whose id was "".


def _ami_build(tmp_path: Path, ec2, monkeypatch, artifacts: list) -> dict:
    publish_ami(REGION, "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00")
    # the AMI the build makes, which --imds-v2 (the default) sets ImdsSupport on
    publish_ami(REGION, "ami-0123456789abcdef0", "ktinfra-kt-smoke-1790000000", "2026-11-01T00:00:00")
    packer = stand_in_packer(tmp_path / "packer")
    monkeypatch.setenv("FAKE_ARTIFACTS", json.dumps(artifacts))
    return build.run(_req(tmp_path, SMOKE, packer=str(packer)), ec2=ec2)


@pytest.mark.parametrize(
    "artifact",
    [
        f"{REGION}:ami-0123456789abcdef0",
        f"us-east-1:ami-0fedcba987654321f,{REGION}:ami-0123456789abcdef0",
        f"{REGION}:ami-0123456789abcdef0,us-east-1:ami-0fedcba987654321f",
    ],
)
def test_the_manifest_takes_the_ami_of_the_build_region(tmp_path, ec2, monkeypatch, artifact):
    result = _ami_build(tmp_path, ec2, monkeypatch, [artifact])
    assert result["image"]["id"] == "ami-0123456789abcdef0"
    assert result["image"]["region"] == REGION
    written = (tmp_path / "out" / "smoke-amazon-ebs" / "manifest.json").read_text()
    assert '"id": "ami-0123456789abcdef0"' in written


@pytest.mark.parametrize("artifact", [None, "", "ami-0123456789abcdef0", "us-east-1:ami-0fedcba987654321f"])
def test_an_artifact_without_an_ami_of_the_region_is_unusable(tmp_path, ec2, monkeypatch, artifact):
    with pytest.raises(ImageError) as info:
        _ami_build(tmp_path, ec2, monkeypatch, [artifact])
    text = str(info.value)
    assert text.startswith("the build finished but its outputs are unusable: ValueError: ")
    assert f"names no AMI in {REGION}" in text
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["last-failed.log"]
