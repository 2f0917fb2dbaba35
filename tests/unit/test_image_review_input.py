"""Fresh-eyes review of `ktinfra image build` input: what was typed is refused as a whole, before anything
is installed or started (`image build --check` is what `make image` runs first)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.image import ImageError, spec


def _check(*args: str):
    return CliRunner().invoke(app, ["image", "build", "--check", *args])


@pytest.mark.parametrize(
    "envs", [["inference", "stf"], ["stf", "kt-kernel"], ["sft", "inference", "trainig"]]
)
def test_a_typo_among_good_env_names_is_refused(envs):
    """`--env inference --env stf` used to build the inference env alone (tag kt-0.7-inference) and say
    `input ok`: the typo was dropped, so the image silently lacked the env that was asked for."""
    result = _check(*[arg for env in envs for arg in ("--env", env)])
    assert result.exit_code == 1, result.output
    bad = envs[-1] if envs[-1] not in ("kt-kernel", "inference", "sft") else envs[0]
    assert f"no env of profile kt-0.7 matches ['{bad}']" in result.output
    assert "input ok" not in result.output


@pytest.mark.parametrize(
    ("envs", "build"),
    [
        (["inference", "sft"], "kt-0.7-docker"),
        (["kt-kernel"], "kt-0.7-inference-docker"),
        (["sft", "kt-sft"], "kt-0.7-sft-docker"),  # role and name of one env
    ],
)
def test_good_env_names_still_pass(envs, build):
    result = _check(*[arg for env in envs for arg in ("--env", env)])
    assert result.exit_code == 0, result.output
    assert f"input ok: build {build}" in result.output


def test_env_specs_names_every_unknown_env():
    with pytest.raises(ImageError, match=r"matches \['x', 'y'\]; it has \['inference', 'sft'\]"):
        spec.env_specs(spec.load("kt-0.7"), only=["inference", "x", "y", "x"])


def test_chosen_env_without_pins_says_so():
    profile = {"name": "p", "envs": {"inference": {"name": "a"}, "sft": {"name": "b", "packages": ["x==1"]}}}
    with pytest.raises(ImageError, match="env inference of profile p pins no packages"):
        spec.env_specs(profile, only=["inference"])
