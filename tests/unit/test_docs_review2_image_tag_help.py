"""`image build --help` says what tag a build without --tag gets, and that is the tag the build takes.

The help said "default: the profile name"; since `--env` builds stopped taking the full image's tag, a
`--env inference` build of kt-0.7 is tagged kt-0.7-inference (README "Set-up" says so). The example the help
now gives is checked against the build's own input check (no docker, packer or AWS involved)."""

import re

import typer

from ktinfra.cli import app
from ktinfra.image.build import BuildRequest, check_input


def _tag_help() -> str:
    build = typer.main.get_command(app).commands["image"].commands["build"]
    return next(p.help for p in build.params if "--tag" in p.opts)


def _default_tag(tmp_path, envs: list[str]) -> str:
    _, _, name = check_input(BuildRequest(envs=envs, out_root=tmp_path / "out", wheelhouse=tmp_path))
    return name.removesuffix("-docker")


def test_the_tag_help_states_the_default_for_a_full_and_a_partial_build(tmp_path):
    text = _tag_help()
    assert "the profile name" in text and "--env" in text, text
    example = re.search(r"kt-0\.7-\w+", text)
    assert example, text
    assert _default_tag(tmp_path, []) == "kt-0.7"
    assert _default_tag(tmp_path, ["inference"]) == example.group(0) == "kt-0.7-inference"
