"""`ktinfra doctor` against real Python envs on this host (venvs made with --without-pip, distributions
laid out as pip lays them out: NAME-VERSION.dist-info/METADATA)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ktinfra import doctor

SFT_PINS = {"torch": "2.7.1", "torchaudio": "2.7.1", "transformers": "4.56.0", "huggingface_hub": "0.34.0"}
KT_042 = "0.4.2+cu128torch27fancy"
WHEELS_OK = {"ktransformers": KT_042, "flash_attn": "2.8.3"}  # flash-attn's METADATA: no +cu12torch...


def make_env(prefix: Path, dists: dict[str, str], modules: tuple[str, ...] = ()) -> Path:
    """A real venv holding `dists` (name -> version) and importable `modules`; its bin/python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    purelib = sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)})
    site = Path(purelib)
    for name, version in dists.items():
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for module in modules:
        (site / module).mkdir(parents=True)
        (site / module / "__init__.py").write_text("")
    return prefix / "bin" / "python"


def sft_pins_check(python: Path) -> doctor.Check:
    report = doctor.run(["local://"], "any", "kt-0.4-autodl", sft_python=str(python), select="pins and sft")
    [check] = report.checks
    return check


@pytest.mark.parametrize(
    ("wheels", "problems"),
    [
        (
            {"ktransformers": "0.3.0", "flash_attn": "2.5.0"},
            ["ktransformers 0.3.0 does not satisfy ==0.4.2+cu128torch27fancy",
             "flash-attn 2.5.0 does not satisfy ==2.8.3"],
        ),
        ({"flash_attn": WHEELS_OK["flash_attn"]}, [f"ktransformers missing (profile pins =={KT_042})"]),
    ],
)  # fmt: skip
def test_the_profiles_wheel_pins_are_checked(tmp_path, wheels, problems):
    """Only `packages` were read: kt-0.4-autodl's ktransformers and flash-attn wheels (its KT) were never
    checked, so ktransformers 0.3.0, or none, passed."""
    check = sft_pins_check(make_env(tmp_path / "sft", {**SFT_PINS, **wheels}, ("llamafactory",)))
    assert check.status == "failed", check
    assert check.message.split(": ", 1)[1].split("; ") == problems


def test_an_env_with_the_profiles_wheels_and_git_source_passes(tmp_path):
    check = sft_pins_check(make_env(tmp_path / "sft", {**SFT_PINS, **WHEELS_OK}, ("llamafactory",)))
    assert check.status == "passed", check
    assert "ktransformers==0.4.2+cu128torch27fancy" in check.output and "llamafactory" in check.output


def test_a_missing_git_source_fails(tmp_path):
    check = sft_pins_check(make_env(tmp_path / "sft", {**SFT_PINS, **WHEELS_OK}))
    assert check.status == "failed" and check.message.endswith(
        "llamafactory missing (profile pins any version)"
    )


def test_a_python_path_with_a_space_is_checked(tmp_path):
    """The path reached the shell unquoted: '/x/my envs/sft/bin/python' was 'does not run'."""
    python = make_env(tmp_path / "my envs" / "sft", {**SFT_PINS, **WHEELS_OK}, ("llamafactory",))
    check = sft_pins_check(python)
    assert check.status == "passed", check


def test_shell_text_in_a_python_path_is_not_run(tmp_path):
    marker = tmp_path / "ran"
    python = make_env(tmp_path / "sft", {**SFT_PINS, **WHEELS_OK}, ("llamafactory",))
    check = sft_pins_check(f"{python} -V && touch {marker} && true")
    assert not marker.exists()
    assert check.status == "failed" and "does not run" in check.message
