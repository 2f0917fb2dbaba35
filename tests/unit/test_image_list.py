"""`ktinfra image list` lists the good builds and names every manifest it cannot read (no docker here)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import listing

GOOD = {
    "image": {"source": "docker", "id": "sha256:abc", "tag": "ktinfra/kt:smoke"},
    "profile": {"ref": "smoke", "name": "smoke"},
    "sizes": {"image_bytes": 3 * 2**30},
    "build": {"started": "2026-01-01T00:00:00+00:00", "duration_s": 12.5},
}
BROKEN = {
    "list": ("[]", "is not a JSON object (it holds a list)"),
    "no-source": ('{"image": {"id": "x"}}', "image.source is missing"),
    "image-list": ('{"image": []}', "image is not an object"),
    "bad-json": ("{", "is not valid JSON"),
    "bad-duration": (
        json.dumps({**GOOD, "build": {"started": "x", "duration_s": "long"}}),
        "build.duration_s is not a number",
    ),
    # a 400-digit size ended the table in an OverflowError traceback; a negative one showed "-1.00 GiB"
    "huge-size": (json.dumps(GOOD).replace(str(3 * 2**30), "9" * 400), "sizes.image_bytes is too large"),
    "negative-size": (
        json.dumps({**GOOD, "sizes": {"image_bytes": -(2**30)}}),
        "sizes.image_bytes is negative",
    ),
    "negative-duration": (
        json.dumps({**GOOD, "build": {"started": "x", "duration_s": -1}}),
        "build.duration_s is negative",
    ),
}


@pytest.fixture
def out(tmp_path, monkeypatch):
    monkeypatch.setattr(listing.shutil, "which", lambda _: None)  # no docker images in these lists
    (tmp_path / "smoke-docker").mkdir()
    (tmp_path / "smoke-docker" / "manifest.json").write_text(json.dumps(GOOD))
    for name, (text, _) in BROKEN.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(text)
    (tmp_path / "latin1").mkdir()
    (tmp_path / "latin1" / "manifest.json").write_bytes(b'{"image": "caf\xe9"}')
    return tmp_path


def test_json_lists_good_build_and_each_unreadable_manifest(out):
    result = CliRunner().invoke(app, ["image", "list", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["manifest"]: row for row in json.loads(result.stdout)}
    good = rows.pop(str(out / "smoke-docker" / "manifest.json"))
    assert good["image"] == "ktinfra/kt:smoke" and good["source"] == "docker" and good["error"] is None
    assert good["size_bytes"] == 3 * 2**30 and good["duration_s"] == 12.5
    assert len(rows) == len(BROKEN) + 1
    for name, (_, why) in BROKEN.items():
        path = str(out / name / "manifest.json")
        row = rows[path]
        assert row["error"].startswith(f"manifest {path}") and why in row["error"]
        assert row["id"] is None and row["image"] is None
        assert f"warning: skipped manifest {path}" in result.stderr
    assert "cannot be read" in rows[str(out / "latin1" / "manifest.json")]["error"]
    assert len(result.stderr.strip().splitlines()) == len(BROKEN) + 1  # one line each


def test_table_shows_good_build_and_warns_about_the_rest(out, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # the table folds cells to the terminal's width
    result = CliRunner().invoke(app, ["image", "list", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "ktinfra/kt:smoke" in result.stdout and "3.00 GiB" in result.stdout
    assert "no-source" not in result.stdout
    assert str(out / "no-source" / "manifest.json") in result.stderr
    assert "image.source is missing" in result.stderr


def test_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "afile").write_text("x")
    result = CliRunner().invoke(app, ["image", "list", "--out", str(tmp_path / "afile")])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"error: --out {tmp_path / 'afile'} is not a directory\n"


def test_amazon_manifest_without_image_bytes_listed(tmp_path, monkeypatch):
    monkeypatch.setattr(listing.shutil, "which", lambda _: None)
    ami = {**GOOD, "image": {"source": "amazon-ebs", "id": "ami-1", "region": "us-east-1"}}
    ami["sizes"] = {"root_volume_gb": 30}
    (tmp_path / "smoke-amazon-ebs").mkdir()
    (tmp_path / "smoke-amazon-ebs" / "manifest.json").write_text(json.dumps(ami))
    [row] = listing.builds(tmp_path)
    assert (row["image"], row["source"], row["error"]) == ("ami-1", "amazon-ebs", None)
    assert row["size_bytes"] is None


def test_out_that_does_not_exist_is_refused(tmp_path):
    result = CliRunner().invoke(app, ["image", "list", "--out", str(tmp_path / "typo"), "--json"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"error: --out {tmp_path / 'typo'} does not exist\n"


def test_default_out_before_the_first_build_lists_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(listing.shutil, "which", lambda _: None)
    monkeypatch.setattr("ktinfra.commands.image.REPO_ROOT", tmp_path)
    result = CliRunner().invoke(app, ["image", "list", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


def test_help_shows_the_default_out_in_brackets():
    """Before: rich read '[default: out/image of the checkout]' as markup and showed 'are .'."""
    result = CliRunner().invoke(app, ["image", "list", "--help"])
    assert result.exit_code == 0
    shown = " ".join(result.stdout.replace("│", " ").split())  # the help box wraps the line
    assert "Where build directories are [default: out/image of the checkout]." in shown


def test_docker_whose_daemon_is_down_still_lists_the_manifests(tmp_path, monkeypatch):
    """Before: `docker info` failing ended the list with exit 1 and no rows, AMI manifests included."""
    # the real docker CLI, pointed at a socket no daemon listens on
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-daemon.sock'}")
    ami = {**GOOD, "image": {"source": "amazon-ebs", "id": "ami-1", "region": "us-east-1"}}
    out = tmp_path / "out"
    (out / "smoke-amazon-ebs").mkdir(parents=True)
    (out / "smoke-amazon-ebs" / "manifest.json").write_text(json.dumps(ami))
    result = CliRunner().invoke(app, ["image", "list", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (row["image"], row["source"], row["error"]) == ("ami-1", "amazon-ebs", None)
    assert result.stderr == (
        "warning: docker images skipped: the docker daemon is not reachable: "
        "run `bash scripts/docker-ready.sh`\n"
    )
