"""Odd input to `ktinfra image`: paths in the way, non-finite numbers and deep nesting in manifests, bad
root volume sizes, a missing packer. Each is refused or handled with one clear line, nothing half-written
and no traceback. docker is never run: dockercli is replaced where a build needs it."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import boto3
import pytest
from image_moto import DLAMI, publish_ami
from moto import mock_aws
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import ImageError, build, dockercli, listing, manifest, spec

SMOKE = Path(__file__).parents[1] / "integration" / "image" / "smoke-profile.yaml"
GOOD = {
    "image": {"source": "docker", "id": "sha256:abc", "tag": "ktinfra/kt:smoke"},
    "profile": {"ref": "smoke", "name": "smoke"},
    "sizes": {"image_bytes": 3 * 2**30},
    "build": {"started": "2026-01-01T00:00:00+00:00", "duration_s": 12.5},
}
DEEP = "[" * 200_000 + "]" * 200_000


def _strict(text: str):
    """json.loads that refuses NaN/Infinity, as any strict JSON reader does."""

    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant} in the output")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def fake_docker(fake_docker, monkeypatch):
    """conftest's fake_docker, recording the build containers removed (returned)."""
    removed: list[str] = []
    monkeypatch.setattr(dockercli, "remove_container", removed.append)
    return removed


@pytest.fixture
def no_docker(monkeypatch):
    def refuse(*args, **_):
        raise AssertionError(f"docker was asked: {args}")

    monkeypatch.setattr(dockercli, "_docker", refuse)
    monkeypatch.setattr(listing.shutil, "which", lambda _: None)  # no docker images in lists


# --out and --wheelhouse


def test_wheelhouse_that_is_a_file_is_refused_before_anything_is_written(tmp_path, fake_docker):
    afile = tmp_path / "afile"
    afile.write_text("hi\n")
    out = tmp_path / "bout"
    with pytest.raises(ImageError, match=f"--wheelhouse {afile} is not a directory"):
        build.prepare(build.BuildRequest(out_root=out, wheelhouse=afile))
    result = CliRunner().invoke(
        app, ["image", "build", "--out", str(out), "--wheelhouse", str(afile), "--packer", "/nonexistent"]
    )
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: --wheelhouse") and "Traceback" not in result.output
    assert not out.exists()  # no .partial left behind
    assert fake_docker == []


def test_out_under_a_file_is_refused(tmp_path, fake_docker):
    afile = tmp_path / "afile"
    afile.write_text("hi\n")
    out = afile / "sub"
    with pytest.raises(ImageError, match=f"--out {out} cannot be made: {afile} is not a directory"):
        build.prepare(build.BuildRequest(out_root=out, wheelhouse=tmp_path / "wh"))
    result = CliRunner().invoke(app, ["image", "build", "--out", str(out), "--wheelhouse", str(tmp_path)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("error: --out") and "Traceback" not in result.output
    assert afile.read_text() == "hi\n"


@pytest.mark.parametrize("name", ["smoke-docker", "smoke-docker.partial", "last-failed.log"])
def test_out_entry_in_the_way_is_refused(tmp_path, fake_docker, name):
    out = tmp_path / "out"
    out.mkdir()
    # a file where the build or its stage directory goes, a directory where the failure log goes
    (out / name).mkdir() if name.endswith(".log") else (out / name).write_text("x")
    with pytest.raises(ImageError, match=f"--out {out}: {out / name} is"):
        build.prepare(build.BuildRequest(profile=str(SMOKE), out_root=out, wheelhouse=tmp_path / "wh"))


# non-finite numbers in a manifest


def test_non_finite_numbers_are_unknown_in_list_json(tmp_path, no_docker):
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "manifest.json").write_text(json.dumps(GOOD))
    text = json.dumps(GOOD).replace("3221225472", "NaN").replace("12.5", "1e999")
    (tmp_path / "nan").mkdir()
    (tmp_path / "nan" / "manifest.json").write_text(text)
    (tmp_path / "inf").mkdir()
    (tmp_path / "inf" / "manifest.json").write_text(text.replace("NaN", "-Infinity"))
    result = CliRunner().invoke(app, ["image", "list", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    rows = {Path(r["manifest"]).parent.name: r for r in _strict(result.stdout)}
    assert rows["good"]["size_bytes"] == 3 * 2**30 and rows["good"]["duration_s"] == 12.5
    for name in ("nan", "inf"):
        row = rows[name]
        assert row["error"] is None and row["image"] == "ktinfra/kt:smoke"
        assert row["size_bytes"] is None and row["duration_s"] is None
    json.dumps(rows, allow_nan=False)
    table = CliRunner().invoke(app, ["image", "list", "--out", str(tmp_path)])
    assert table.exit_code == 0 and "nan GiB" not in table.stdout, table.output


def test_manifest_field_treats_non_finite_as_null(tmp_path):
    data = {"sizes": {"image_bytes": math.nan, "other": math.inf}, "build": {"duration_s": -math.inf}}
    path = tmp_path / "manifest.json"
    assert manifest.field(data, "sizes.image_bytes", (int, float), path, default=None) is None
    assert manifest.field(data, "sizes.other", (int, float), path, default=0) == 0
    with pytest.raises(ImageError, match="build.duration_s is missing"):
        manifest.field(data, "build.duration_s", (int, float), path)
    path.write_text('{"a": NaN, "b": [Infinity, -Infinity, 1e999, 2.5]}')
    assert manifest.read(path) == {"a": None, "b": [None, None, None, 2.5]}


# deep nesting


@pytest.mark.parametrize("text", [DEEP, '{"a":' * 200_000 + "1" + "}" * 200_000])
def test_deeply_nested_manifest_is_a_corrupt_manifest(tmp_path, text):
    path = tmp_path / "manifest.json"
    path.write_text(text)
    with pytest.raises(ImageError, match=f"manifest {path} .*nested too deeply"):
        manifest.read(path)


def test_list_lists_the_other_builds_past_a_deep_manifest(tmp_path, no_docker):
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "manifest.json").write_text(json.dumps(GOOD))
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "manifest.json").write_text(DEEP)
    result = CliRunner().invoke(app, ["image", "list", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    rows = {Path(r["manifest"]).parent.name: r for r in _strict(result.stdout)}
    assert rows["good"]["error"] is None
    assert "nested too deeply" in rows["deep"]["error"] and rows["deep"]["id"] is None
    assert f"warning: skipped manifest {tmp_path / 'deep' / 'manifest.json'}" in result.stderr


def test_verify_refuses_a_deep_manifest_before_docker(tmp_path, no_docker):
    path = tmp_path / "manifest.json"
    path.write_text(DEEP)
    result = CliRunner().invoke(app, ["image", "verify", "ktinfra/kt:smoke", "--manifest", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith(f"error: manifest {path}") and "nested too deeply" in result.output


# image.root_volume_gb


def _profile(image) -> dict:
    return {"name": "p", "image": image, "envs": {"inference": {"name": "a", "packages": ["x==1"]}}}


@pytest.mark.parametrize("size", ["big", "40", -5, 0, True, 2.5, [40]])
def test_root_volume_must_be_a_positive_whole_number(size):
    profile = _profile({"root_volume_gb": size})
    with pytest.raises(ImageError, match=r"image.root_volume_gb must be a whole number of GB above 0"):
        spec.root_volume_gb(profile, spec.env_specs(profile))


def test_root_volume_given_unset_or_image_not_a_mapping():
    profile = _profile({"root_volume_gb": 120})
    assert spec.root_volume_gb(profile, spec.env_specs(profile)) == 120
    for image in (None, {}, {"root_volume_gb": None}):
        profile = _profile(image)
        # 40 GB base + one env of unknown size (25 GB) with 25 % headroom
        assert spec.root_volume_gb(profile, spec.env_specs(profile)) == 40 + 32
    profile = _profile(["root_volume_gb"])
    with pytest.raises(ImageError, match="image must be a mapping"):
        spec.root_volume_gb(profile, spec.env_specs(profile))


@pytest.mark.parametrize(("size", "shown"), [('"big"', "'big'"), ("-5", "-5")])
def test_amazon_ebs_build_refuses_bad_root_volume(tmp_path, monkeypatch, size, shown):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    profile = tmp_path / "site.yaml"
    profile.write_text(SMOKE.read_text().replace("root_volume_gb: 30", f"root_volume_gb: {size}"))
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="eu-north-1")
        publish_ami("eu-north-1", "ami-00000000000000dl", DLAMI.format("20261001"), "2026-10-01T00:00:00")
        req = build.BuildRequest(
            source="amazon-ebs", profile=str(profile), region="eu-north-1", out_root=tmp_path / "out"
        )
        with pytest.raises(
            ImageError, match=f"root_volume_gb must be a whole number of GB above 0, not {shown}"
        ):
            build.prepare(req, ec2=ec2)
    assert not (tmp_path / "out").exists()


# packer missing, and the failure log


def test_missing_packer_keeps_the_last_failure_log(tmp_path, fake_docker):
    out = tmp_path / "out"
    out.mkdir()
    (out / "last-failed.log").write_text("the last build that ran\n")
    for packer in ("/nonexistent", str(tmp_path)):  # nothing there; a directory
        req = build.BuildRequest(profile=str(SMOKE), out_root=out, wheelhouse=tmp_path / "wh", packer=packer)
        with pytest.raises(ImageError, match=rf"packer not found \({packer}\)"):
            build.run(req)
        assert (out / "last-failed.log").read_text() == "the last build that ran\n"
    assert [p.name for p in out.iterdir()] == ["last-failed.log"]
    assert not (tmp_path / "wh").exists()
    assert fake_docker == []  # no container was started, none to remove


def test_failed_build_log_says_why(tmp_path, fake_docker):
    packer = _fake_packer(tmp_path / "packer")
    out = tmp_path / "out"
    req = build.BuildRequest(profile=str(SMOKE), out_root=out, wheelhouse=tmp_path / "wh", packer=str(packer))
    with pytest.raises(ImageError, match="packer validate failed"):
        build.run(req)
    log = (out / "last-failed.log").read_text()
    assert "template broken" in log and log.rstrip().endswith("error: packer validate failed:")
    assert [p.name for p in out.iterdir()] == ["last-failed.log"]  # the .partial directory is gone
    assert len(fake_docker) == 1  # the build container is removed


def _fake_packer(path: Path, version_rc: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    script = f'#!/bin/sh\ncase "$1" in version) echo "Packer v1.6.6"; exit {version_rc};; esac\n'
    path.write_text(script + 'echo "template broken" >&2\nexit 1\n')
    path.chmod(0o755)
    return path


def _smoke_build(tmp_path: Path, out: Path) -> list[str]:
    """`ktinfra image build` of the smoke profile into OUT (its --packer given by the test)."""
    return [
        "image",
        "build",
        "--profile",
        str(SMOKE),
        "--out",
        str(out),
        "--wheelhouse",
        str(tmp_path / "wh"),
    ]


def test_relative_packer_path_runs_from_the_checkout(tmp_path, fake_docker, monkeypatch):
    """Before: `--packer fp/packer` was found from the caller's directory but run from the checkout, and
    the build ended in an sh.ErrorReturnCode traceback."""
    _fake_packer(tmp_path / "fp" / "packer")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    args = _smoke_build(tmp_path, out)
    result = CliRunner().invoke(app, [*args, "--packer", "fp/packer"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.stderr.splitlines()[-2:] == ["error: packer validate failed:", "template broken"]
    assert "Traceback" not in result.output


def test_packer_whose_version_fails_is_one_error_line(tmp_path, fake_docker):
    packer = _fake_packer(tmp_path / "packer", version_rc=3)
    out = tmp_path / "out"
    args = _smoke_build(tmp_path, out)
    result = CliRunner().invoke(app, [*args, "--packer", str(packer)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.stderr.splitlines()[-2:] == ["error: packer version failed (exit 3):", "Packer v1.6.6"]
    assert [p.name for p in out.iterdir()] == ["last-failed.log"]


# a packer build that succeeds but leaves outputs no manifest can be made of

PACKER_OUTPUTS = """#!{python}
import json, os, sys
if sys.argv[1] == "version":
    print("Packer v1.6.6")
if sys.argv[1] != "build":
    sys.exit(0)
out = json.load(open(sys.argv[-2].split("=", 1)[1]))["output_dir"]
for name, text in json.loads(os.environ["FAKE_OUTPUTS"]).items():
    open(os.path.join(out, name), "w").write(text)
"""
GOOD_PACKAGES = json.dumps({"envs": {}})
GOOD_ARTIFACT = json.dumps({"builds": [{"builder_type": "docker", "artifact_id": "sha256:abc"}]})


@pytest.mark.parametrize(
    ("outputs", "why"),
    [
        ({"packages.json": GOOD_PACKAGES}, "packer-manifest.json is missing"),
        ({"packer-manifest.json": GOOD_ARTIFACT}, "packages.json is missing"),
        ({"packages.json": "{", "packer-manifest.json": GOOD_ARTIFACT}, "JSONDecodeError: Expecting"),
        ({"packages.json": GOOD_PACKAGES, "packer-manifest.json": "{}"}, "lists no build"),
        ({"packages.json": "[]", "packer-manifest.json": GOOD_ARTIFACT}, "TypeError: list indices"),
        ({"packages.json": "{}", "packer-manifest.json": GOOD_ARTIFACT}, "a file lacks the key 'envs'"),
    ],
)
def test_unusable_build_outputs_are_one_error_line(tmp_path, fake_docker, monkeypatch, outputs, why):
    """Before: FileNotFoundError, JSONDecodeError, ValueError, TypeError or KeyError tracebacks."""
    packer = tmp_path / "packer"
    packer.write_text(PACKER_OUTPUTS.format(python=sys.executable))
    packer.chmod(0o755)
    monkeypatch.setenv("FAKE_OUTPUTS", json.dumps(outputs))
    out = tmp_path / "out"
    args = _smoke_build(tmp_path, out)
    result = CliRunner().invoke(app, [*args, "--packer", str(packer), "--tag", "t1"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: the build finished but its outputs are unusable: "), last
    assert why in last and last.endswith(
        "; docker image ktinfra/kt:t1 was tagged without a manifest "
        "(build again, or `docker rmi ktinfra/kt:t1`)"
    )
    assert [p.name for p in out.iterdir()] == ["last-failed.log"]
