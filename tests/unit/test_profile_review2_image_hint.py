"""`image build --check`'s refusal of a profile it cannot bake offers `--env` only where some env of the
profile could be baked, and then names it
(kt-0.4-autodl: both envs are refused, the hint cannot work)."""

from __future__ import annotations

from typer.testing import CliRunner

from ktinfra.cli import app

SITE = """\
name: site-mixed
generation: current
python: "3.11"
envs:
  inference:
    name: kt-kernel
    packages: [kt-kernel==0.7.2, torch==2.9.1]
  sft:
    name: kt-sft
    packages: [torch==2.9.1]
    conda_patches:
      - channel: conda-forge
        packages: [libstdcxx-ng]
"""


def _check(*args: str):
    return CliRunner().invoke(app, ["image", "build", "--check", *args])


def test_no_env_hint_when_no_env_of_the_profile_can_be_baked(tmp_path):
    result = _check("--profile", "kt-0.4-autodl", "--out", str(tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert "cannot be baked into an image" in result.output
    assert "--env" not in result.output
    assert not (tmp_path / "out").exists()


def test_one_refused_env_of_the_legacy_profile_gets_no_env_hint(tmp_path):
    result = _check("--profile", "kt-0.4-autodl", "--env", "sft", "--out", str(tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert "env kt-sft is patched with conda" in result.output
    assert "--env" not in result.output


def test_the_hint_names_the_env_that_can_be_baked(tmp_path):
    profile = tmp_path / "site.yaml"
    profile.write_text(SITE)
    result = _check("--profile", str(profile), "--out", str(tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert "env kt-sft is patched with conda (libstdcxx-ng)" in result.output
    assert "or bake only the envs it can (--env inference)" in " ".join(result.output.split())
    # and the hint works: that env alone passes the check
    alone = _check("--profile", str(profile), "--env", "inference", "--out", str(tmp_path / "out"))
    assert alone.exit_code == 0, alone.output
