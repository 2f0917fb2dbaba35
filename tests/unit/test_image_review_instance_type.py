"""Fresh-eyes review: `--instance-type` with a trailing newline.

The type name was checked with `re.match` and a closing `$`, which also matches before a final newline:
`--instance-type $'m7i.8xlarge\\n'` passed `image build --check` ("input ok", so `make image` went on to
install packer and docker) and reached the boto3 look-up. It is now refused by the input check.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import ImageError, aws


@pytest.mark.parametrize("itype", ["m7i.8xlarge\n", "m7i.8xlarge\n\n", "\nm7i.8xlarge"])
def test_newline_in_instance_type_is_refused_by_check(tmp_path, itype):
    result = CliRunner().invoke(
        app,
        [
            "image",
            "build",
            "--check",
            "--source",
            "amazon-ebs",
            "--source-ami",
            "ami-0123456789abcdef0",
            "--instance-type",
            itype,
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 1, result.output
    assert "is not an EC2 instance type" in result.output
    assert "input ok" not in result.output


def test_newline_is_no_amx_family():
    assert aws.is_amx_family("m7i.8xlarge")
    assert not aws.is_amx_family("m7i.8xlarge\n")
    with pytest.raises(ImageError, match="is not an EC2 instance type"):
        aws.check_type_name("p5en.48xlarge\n")
    aws.check_type_name("p5en.48xlarge")
