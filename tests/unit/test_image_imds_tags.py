"""amazon-ebs builds after 5edf064: packer 1.6.6 cannot require IMDSv2, so ktinfra sets the new AMI's
ImdsSupport to v2.0 itself (--imds-v2, the default; EC2 cannot undo it), and `--aws-tag KEY=VALUE` adds tags
to the template's aws_tags, checked as EC2 and packer 1.6.6 would take them before anything runs.

moto (5.x) takes ModifyImageAttribute's ImdsSupport without keeping it, so the calls are recorded from the
boto3 client's own events (botocore checks their parameters against the real service model first), and
botocore's Stubber pins the exact request."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from image_moto import DLAMI, publish_ami, stand_in_packer
from moto import mock_aws
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import ImageError, aws, build

SMOKE = Path(__file__).parents[1] / "integration" / "image" / "smoke-profile.yaml"
REGION = "eu-north-1"
BUILT = "ami-0123456789abcdef0"  # the AMI the stand-in packer's manifest names


@pytest.fixture
def aws_env(monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        publish_ami(REGION, "ami-000000000000000d1", DLAMI.format("20261001"), "2026-10-01T00:00:00")
        yield


@pytest.fixture
def ec2(aws_env):
    return boto3.client("ec2", region_name=REGION)


@pytest.fixture
def fake_packer(tmp_path, monkeypatch) -> Path:
    packer = stand_in_packer(tmp_path / "packer", [f"{REGION}:{BUILT}"])
    monkeypatch.setenv("FAKE_CALLS", str(tmp_path / "packer-calls"))
    monkeypatch.setenv("FAKE_VARS_COPY", str(tmp_path / "vars.json"))
    return packer


def _modify_calls(ec2) -> list[dict]:
    """The ModifyImageAttribute requests the client sends: their query parameters, serialized once botocore
    has checked them against the service model."""
    calls: list[dict] = []

    def sent(params, **_):
        calls.append({k: v for k, v in params["body"].items() if k not in ("Action", "Version")})

    ec2.meta.events.register("before-call.ec2.ModifyImageAttribute", sent)
    return calls


def _req(tmp_path: Path, packer: Path, **kw) -> build.BuildRequest:
    return build.BuildRequest(
        source="amazon-ebs",
        profile=str(SMOKE),
        region=REGION,
        out_root=tmp_path / "out",
        packer=str(packer),
        **kw,
    )


def _written_manifest(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "smoke-amazon-ebs" / "manifest.json").read_text())


def test_the_service_model_takes_imds_support_and_the_request_is_exactly_that(monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    client = boto3.client("ec2", region_name=REGION)
    shape = client.meta.service_model.operation_model("ModifyImageAttribute").input_shape
    assert "Value" in shape.members["ImdsSupport"].members
    with Stubber(client) as stub:
        stub.add_response("modify_image_attribute", {}, {"ImageId": BUILT, "ImdsSupport": {"Value": "v2.0"}})
        aws.require_imds_v2(client, BUILT, REGION)
        stub.assert_no_pending_responses()


def test_a_refused_request_names_the_ami_that_exists(monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    client = boto3.client("ec2", region_name=REGION)
    with Stubber(client) as stub:
        stub.add_client_error("modify_image_attribute", "UnauthorizedOperation", "not authorized")
        with pytest.raises(ImageError) as info:
            aws.require_imds_v2(client, BUILT, REGION)
    text = str(info.value)
    assert text.startswith(f"AMI {BUILT} was built and exists in {REGION}, but setting its ImdsSupport")
    assert "UnauthorizedOperation" in text
    assert f"--image-id {BUILT} --imds-support v2.0" in text


def test_a_build_requires_imdsv2_on_the_ami_of_packers_manifest(tmp_path, ec2, fake_packer):
    publish_ami(REGION, BUILT, "ktinfra-kt-smoke-1790000000", "2026-11-01T00:00:00")
    calls = _modify_calls(ec2)
    result = build.run(_req(tmp_path, fake_packer), ec2=ec2)
    assert calls == [{"ImageId": BUILT, "ImdsSupport.Value": "v2.0"}]
    written = _written_manifest(tmp_path)
    assert written["image"]["imds_support"] == result["image"]["imds_support"] == "v2.0"
    assert written["build"]["imds_v2"] is True


def test_no_imds_v2_leaves_the_ami_alone_and_says_so_in_the_manifest(tmp_path, ec2, fake_packer):
    publish_ami(REGION, BUILT, "ktinfra-kt-smoke-1790000000", "2026-11-01T00:00:00")
    calls = _modify_calls(ec2)
    build.run(_req(tmp_path, fake_packer, imds_v2=False), ec2=ec2)
    assert calls == []
    written = _written_manifest(tmp_path)
    assert written["image"]["imds_support"] is None
    assert written["build"]["imds_v2"] is False


def test_a_failed_imds_call_is_one_error_line_and_the_manifest_is_kept(tmp_path, aws_env, fake_packer):
    # the built AMI is not in moto's EC2: ModifyImageAttribute fails with InvalidAMIID.NotFound
    out = tmp_path / "out"
    args = ["image", "build", "--source", "amazon-ebs", "--profile", str(SMOKE), "--region", REGION]
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--packer", str(fake_packer)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert f"error: AMI {BUILT} was built and exists in {REGION}, but setting its ImdsSupport" in errors[0]
    assert "InvalidAMIID.NotFound" in result.output
    written = _written_manifest(tmp_path)
    assert written["image"]["id"] == BUILT and written["image"]["imds_support"] is None
    assert str(out / "smoke-amazon-ebs" / "manifest.json") in result.output.replace("\n", "")
    assert not (out / "smoke-amazon-ebs.partial").exists()


def test_a_failed_imds_call_is_said_too_when_the_output_cannot_be_put_in_place(
    tmp_path, ec2, fake_packer, monkeypatch
):
    def refused(*_args):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(build, "publish", refused)
    with pytest.raises(ImageError) as info:
        build.run(_req(tmp_path, fake_packer), ec2=ec2)  # the built AMI is not in moto's EC2
    text = str(info.value)
    assert text.startswith("the image was built, but its output could not be put at"), text
    assert f"Also: AMI {BUILT} was built and exists in {REGION}, but setting its ImdsSupport" in text


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), SystemExit(143)], ids=["ctrl-c", "sigterm"])
def test_an_interrupt_while_setting_imds_keeps_the_build_and_names_the_ami(
    tmp_path, ec2, fake_packer, monkeypatch, stop
):
    """The AMI exists once packer is done. Before, a Ctrl-C (or SIGTERM, sigterm_unwinds' SystemExit) during
    the ImdsSupport call went on to the build's cleanup, which removed the stage: the manifest, the only
    record of the AMI's id, was gone. Now the build is put in place (imds_support null) and the command
    fails naming the AMI and how to check and set it."""
    publish_ami(REGION, BUILT, "ktinfra-kt-smoke-1790000000", "2026-11-01T00:00:00")

    def interrupted(*_args):
        raise stop

    monkeypatch.setattr(aws, "require_imds_v2", interrupted)
    with pytest.raises(ImageError) as info:
        build.run(_req(tmp_path, fake_packer), ec2=ec2)
    text = str(info.value)
    assert text.startswith(
        f"interrupted while setting AMI {BUILT}'s ImdsSupport to v2.0: the AMI was built"
    ), text
    assert f"--image-id {BUILT} --imds-support v2.0" in text and "the build's manifest is " in text
    written = _written_manifest(tmp_path)
    assert written["image"]["id"] == BUILT and written["image"]["imds_support"] is None
    assert not (tmp_path / "out" / "smoke-amazon-ebs.partial").exists()


def test_aws_tags_reach_the_template_and_the_manifest(tmp_path, ec2, fake_packer):
    publish_ami(REGION, BUILT, "ktinfra-kt-smoke-1790000000", "2026-11-01T00:00:00")
    tags = ["team=kt", "Name=my-kt", "cost-center=", "path=a=b"]
    result = build.run(_req(tmp_path, fake_packer, aws_tags=tags), ec2=ec2)
    variables = json.loads((tmp_path / "vars.json").read_text())
    given = {"team": "kt", "Name": "my-kt", "cost-center": "", "path": "a=b"}
    assert variables["aws_tags"] == {**given, "ktinfra.build-started": result["build"]["started"]}
    assert _written_manifest(tmp_path)["image"]["aws_tags"] == given


def test_the_longest_tag_ec2_takes_is_taken():
    tags = aws.parse_tags(["k" * 128 + "=" + "v" * 256], build.KTINFRA_TAGS)
    assert tags == {"k" * 128: "v" * 256}


FIFTY = [f"t{i}=x" for i in range(46)]  # + Name and the 4 ktinfra.* tags: 51


@pytest.mark.parametrize(
    ("items", "why"),
    [
        (["team"], "is not KEY=VALUE"),
        (["=kt"], "its key is 0 characters (EC2 takes 1 to 128)"),
        (["k" * 129 + "=v"], "its key is 129 characters"),
        (["aws:team=kt"], "its key starts with aws:"),
        (["AWS:team=kt"], "its key starts with aws:"),
        (["team=" + "v" * 257], "its value is 257 characters (EC2 takes at most 256)"),
        (["team={{timestamp}}"], "which packer reads as a template"),
        (["{{user `x`}}=kt"], "which packer reads as a template"),
        (["ktinfra.profile=other"], "ktinfra sets ktinfra.profile itself"),
        (["ktinfra.build-started=x"], "ktinfra sets ktinfra.build-started itself"),
        (["team=a", "team=b"], "team is given twice"),
        (FIFTY, "make 51; EC2 takes at most 50"),
    ],
)
def test_a_bad_aws_tag_is_refused_before_anything_runs(tmp_path, fake_packer, items, why):
    out = tmp_path / "out"
    tag_args = [arg for item in items for arg in ("--aws-tag", item)]
    base = ["image", "build", "--source", "amazon-ebs", "--profile", str(SMOKE), "--out", str(out)]
    for extra in (["--check"], ["--packer", str(fake_packer)]):
        # no moto and no credentials: a refusal that came from AWS would say so, not `why`
        result = CliRunner().invoke(app, [*base, *tag_args, *extra])
        assert result.exit_code == 1, result.output
        assert result.output.startswith("error: --aws-tag"), result.output
        assert why in result.output.replace("\n", ""), result.output
    assert not (tmp_path / "packer-calls").exists() and not out.exists()


def test_aws_tag_on_a_docker_build_is_refused(tmp_path):
    args = ["image", "build", "--check", "--out", str(tmp_path / "out"), "--aws-tag", "team=kt"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "error: --aws-tag tags what an amazon-ebs build makes on AWS; this is --source docker" in (
        result.output.replace("\n", "")
    )


def test_no_imds_v2_on_a_docker_build_is_refused(tmp_path):
    """Before: taken and ignored, as if the image had been built without what was asked."""
    args = ["image", "build", "--check", "--out", str(tmp_path / "out"), "--no-imds-v2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert (
        "error: --no-imds-v2 leaves an amazon-ebs build's AMI without the IMDSv2 requirement; this is "
        in (result.output.replace("\n", ""))
    )
    assert not (tmp_path / "out").exists()
