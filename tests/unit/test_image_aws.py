"""boto3 code of the amazon-ebs source, against moto's EC2 (AWS itself is unreachable here)."""

from __future__ import annotations

import fnmatch

import boto3
import pytest
from image_moto import DLAMI, publish_ami
from moto import mock_aws

from ktinfra.image import ImageError, aws
from ktinfra.profiles import load_profile, python_versions


@pytest.fixture(scope="module")
def mocked():
    # One moto account for the module (moto's set-up is the slow part); each AMI test uses its own region.
    with pytest.MonkeyPatch.context() as mp:
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            mp.setenv(key, "testing")
        with mock_aws():
            yield


def client(region: str):
    return boto3.client("ec2", region_name=region)


@pytest.fixture(scope="module")
def ec2(mocked):
    return client("eu-west-1")


def test_newest_matching_ami_wins(ec2):
    publish_ami("eu-west-1", "ami-0000000000000old", DLAMI.format("20260101"), "2026-01-01T00:00:00")
    publish_ami("eu-west-1", "ami-0000000000000new", DLAMI.format("20261001"), "2026-10-01T00:00:00")
    publish_ami(
        "eu-west-1", "ami-00000000000arm64", DLAMI.format("20261101"), "2026-11-01T00:00:00", arch="arm64"
    )
    publish_ami(
        "eu-west-1", "ami-000000000000fake", DLAMI.format("20261102"), "2026-11-02T00:00:00", owner_alias=None
    )
    ami = aws.find_source_ami(ec2, "eu-west-1")
    assert ami["id"] == "ami-0000000000000new"
    assert ami["name"].endswith("20261001")


def test_later_pattern_used_when_first_has_none(mocked):
    name = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20261001"
    publish_ami("eu-west-2", "ami-000000000000u2204", name, "2026-10-01T00:00:00")
    assert aws.find_source_ami(client("eu-west-2"), "eu-west-2")["pattern"] == aws.AMI_NAME_PATTERNS[1]


def test_region_without_matching_ami_is_refused(mocked):
    publish_ami("us-east-2", "ami-0000000000000use", DLAMI.format("20261001"), "2026-10-01T00:00:00")
    with pytest.raises(ImageError, match="no NVIDIA Deep Learning base AMI found in region ap-south-1"):
        aws.find_source_ami(client("ap-south-1"), "ap-south-1")


@pytest.mark.parametrize("itype", ["m7i.8xlarge", "c7i.large", "r7i.48xlarge", "m8i.large", "c7i-flex.large"])
def test_amx_instance_types_pass(ec2, itype):
    info = aws.check_instance_type(ec2, itype)
    assert info["manufacturer"] == "Intel"
    assert info["vcpus"] > 0


@pytest.mark.parametrize(
    ("itype", "why"),
    [
        ("m6a.large", "AMD CPUs without AMX"),
        ("p5.48xlarge", "AMD CPUs without AMX"),  # H100 GPUs, but EPYC hosts
        ("p4d.24xlarge", "Intel CPUs without AMX"),  # Cascade Lake
        ("m6i.large", "Intel CPUs without AMX"),  # Ice Lake
        ("m7g.large", "not x86_64"),  # Graviton
        ("zz9.large", "not offered"),
        ("large", "not an EC2 instance type"),
    ],
)
def test_non_amx_instance_types_refused(ec2, itype, why):
    with pytest.raises(ImageError, match=why):
        aws.check_instance_type(ec2, itype)


def test_amx_family_rule_for_gpu_types():
    assert aws.is_amx_family("p5en.48xlarge")
    assert not aws.is_amx_family("p5.48xlarge")
    assert not aws.is_amx_family("g6e.xlarge")


# The base AMI's Ubuntu release must ship a Python the profile accepts: the image play makes venvs of it.

U2204 = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) {}"
U2404 = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) {}"


class FakeEC2:
    """describe_images over a fixed list of image dicts, matched by name pattern like EC2's filter."""

    def __init__(self, images: list[dict]):
        self.images = images

    def describe_images(self, Owners=None, Filters=None, ImageIds=None):  # noqa: N803 - boto3's names
        if ImageIds:
            return {"Images": [i for i in self.images if i["ImageId"] in ImageIds]}
        [pattern] = next(f["Values"] for f in Filters if f["Name"] == "name")
        return {"Images": [i for i in self.images if fnmatch.fnmatchcase(i["Name"], pattern)]}


def _image(ami_id: str, name: str, created: str) -> dict:
    """An Images entry as DescribeImages returns it (the fields ktinfra reads)."""
    return {"ImageId": ami_id, "Name": name, "CreationDate": created, "Architecture": "x86_64",
            "State": "available", "RootDeviceName": "/dev/sda1"}  # fmt: skip


def test_kt_07_gets_the_ubuntu_2404_ami_though_a_2204_one_is_newer():
    """Before: the 22.04 pattern came first; its python3 is 3.10, kt-0.7 needs 3.11/3.12, and the build
    failed on the launched instance."""
    ec2 = FakeEC2(
        [
            _image("ami-2204", U2204.format("20261101"), "2026-11-01"),
            _image("ami-2404", U2404.format("20261001"), "2026-10-01"),
        ]
    )
    pythons = python_versions(load_profile("kt-0.7"))
    ami = aws.find_source_ami(ec2, "eu-west-1", pythons=pythons)
    assert ami["id"] == "ami-2404" and ami["pattern"] == aws.AMI_NAME_PATTERNS[0]
    aws.check_base_python(ami["name"], pythons)


def test_region_with_only_2204_amis_is_refused_for_kt_07():
    ec2 = FakeEC2([_image("ami-2204", U2204.format("20261101"), "2026-11-01")])
    refused = "no NVIDIA Deep Learning base AMI found in region eu-west-1"
    with pytest.raises(ImageError, match=refused) as error:
        aws.find_source_ami(ec2, "eu-west-1", pythons=["3.11", "3.12"])
    # the 22.04 images were there: the message says they were skipped for their python3, not missing
    names, not_tried = str(error.value).split("; not tried: ")
    assert "22.04" not in names and "(Ubuntu 24.04)" in names
    assert "(Ubuntu 22.04)" in not_tried and "their python3 is not Python 3.11 or 3.12" in not_tried


def test_profile_whose_python_no_base_ami_ships_is_refused_before_aws():
    with pytest.raises(ImageError, match=r"no NVIDIA Deep Learning base AMI ships Python 3\.11, which the"):
        aws.find_source_ami(FakeEC2([]), "eu-west-1", pythons=["3.11"])


def test_a_chosen_base_ami_of_the_wrong_release_is_refused():
    ec2 = FakeEC2([_image("ami-2204", U2204.format("20261101"), "2026-11-01")])
    with pytest.raises(
        ImageError,
        match=r"base AMI .*\(Ubuntu 22\.04\) 20261101' is Ubuntu 22\.04 with Python 3\.10, and the profile "
        r"needs Python 3\.11 or 3\.12 .* choose a base AMI of Ubuntu 24\.04 with --source-ami",
    ):
        aws.look_up("eu-west-1", "m7i.8xlarge", "ami-2204", ec2=_WithTypes(ec2), pythons=["3.11", "3.12"])
    # a name that tells no release is the user's choice
    aws.check_base_python("my-own-image", ["3.11"])


class _WithTypes(FakeEC2):
    def __init__(self, inner: FakeEC2):
        super().__init__(inner.images)

    def describe_instance_types(self, InstanceTypes):  # noqa: N803
        cpu = {"Manufacturer": "Intel", "SupportedArchitectures": ["x86_64"]}
        return {"InstanceTypes": [{"ProcessorInfo": cpu, "VCpuInfo": {"DefaultVCpus": 32}}]}
