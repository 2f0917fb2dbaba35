"""Fresh-eyes review: the paths `ktinfra image build` hands to packer must reach it as typed.

Packer runs Go-template interpolation over its settings (what turns the template's {{timestamp}} into the
time), so a `{{` in --out, --playbook or --wheelhouse was rewritten: with `--wheelhouse DIR/x{{timestamp}}`
ktinfra made DIR/x{{timestamp}} and the real docker builder mounted, and docker created as root,
DIR/x1796062728 (seen with packer 1.6.6's `Run command: docker run -v ...`). The docker builder passes the
wheelhouse as `-v HOST:/var/cache/ktinfra/wheelhouse`, so a `:` in it split the mount and `docker run`
failed after the build had started. Both are now refused by the input check (`--check`, `make image`'s
first step) before anything is made.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import REPO_ROOT, ImageError, build

SMOKE = REPO_ROOT / "tests" / "integration" / "image" / "smoke-profile.yaml"


def _check(*args: str):
    return CliRunner().invoke(app, ["image", "build", "--check", *args])


@pytest.mark.parametrize("name", ["x{{timestamp}}", "x{{ .Foo }}"])
def test_template_braces_in_out_are_refused_before_anything_is_made(tmp_path, name):
    out = tmp_path / name
    result = _check("--out", str(out), "--wheelhouse", str(tmp_path / "wh"))
    assert result.exit_code == 1, result.output
    assert "packer reads as a template" in result.output
    assert "--out" in result.output
    assert "input ok" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_template_braces_in_wheelhouse_are_refused(tmp_path):
    wheelhouse = tmp_path / "wh{{timestamp}}"
    result = _check("--out", str(tmp_path / "out"), "--wheelhouse", str(wheelhouse))
    assert result.exit_code == 1, result.output
    assert "--wheelhouse" in result.output and "packer reads as a template" in result.output
    assert list(tmp_path.iterdir()) == []


def test_template_braces_in_playbook_are_refused(tmp_path):
    playbook = tmp_path / "{{timestamp}}.yml"
    playbook.write_text("- hosts: all\n  tasks: []\n")
    result = _check(
        "--out", str(tmp_path / "out"), "--wheelhouse", str(tmp_path / "wh"), "--playbook", str(playbook)
    )
    assert result.exit_code == 1, result.output
    assert "--playbook" in result.output and "packer reads as a template" in result.output


def test_braces_reached_through_a_symlink_are_refused(tmp_path):
    (tmp_path / "a{{timestamp}}").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a{{timestamp}}")
    req = build.BuildRequest(out_root=tmp_path / "link" / "out", wheelhouse=tmp_path / "wh")
    with pytest.raises(ImageError, match="packer reads as a template"):
        build.check_input(req)


def test_colon_in_docker_wheelhouse_is_refused(tmp_path):
    result = _check("--out", str(tmp_path / "out"), "--wheelhouse", str(tmp_path / "a:b"))
    assert result.exit_code == 1, result.output
    assert "splits docker's -v HOST:DIR mount" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["a${x}b", 'a"b', "a}}b{", "a b"])
def test_other_odd_paths_still_pass(tmp_path, name):
    """HCL's ${ in a JSON variables file is a literal, and quotes are JSON-escaped: not refused."""
    result = _check("--out", str(tmp_path / name / "out"), "--wheelhouse", str(tmp_path / name / "wh"))
    assert result.exit_code == 0, result.output
    assert "input ok" in result.output


def test_amazon_ebs_does_not_check_the_unused_wheelhouse(tmp_path):
    """Only the docker build mounts the wheelhouse: amazon-ebs ignores --wheelhouse."""
    req = build.BuildRequest(
        source="amazon-ebs",
        source_ami="ami-0123456789abcdef0",
        out_root=tmp_path / "o",
        wheelhouse=tmp_path / "a:b",
    )
    build.check_input(req)


def _check_profile_in(tmp_path, name: str):
    """image build --check with the smoke profile copied into a folder named `name`."""
    folder = tmp_path / name
    folder.mkdir()
    profile = folder / "smoke.yaml"
    profile.write_text(SMOKE.read_text())
    return _check(
        "--profile", str(profile), "--out", str(tmp_path / "out"), "--wheelhouse", str(tmp_path / "wh")
    )


@pytest.mark.parametrize("name", ["a{{ 7*6 }}b", "a{% raw %}b", "a{#b"])
def test_jinja_in_a_profile_file_path_is_refused(tmp_path, name):
    """The play gets a profile file's path as ktinfra_profile_ref in its extra vars, and ansible templates
    extra vars: with a{{ 7*6 }}b/p.yaml the play read a42b/p.yaml while the manifest named the typed file
    (shown with ansible-playbook's debug of such an extra var)."""
    result = _check_profile_in(tmp_path, name)
    assert result.exit_code == 1, result.output
    assert "ansible reads as a template" in result.output
    assert "input ok" not in result.output


def test_a_plain_profile_file_path_still_passes(tmp_path):
    result = _check_profile_in(tmp_path, "a}b{c")
    assert result.exit_code == 0, result.output
