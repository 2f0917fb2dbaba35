"""A wheel file whose name says another version than its METADATA (flash-attn's release wheels: a 2.8.3
build renamed flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-... after the build). pip and uv take a --find-links
wheel's version from its name and discard one whose METADATA differs, so the legacy SFT env's
`flash-attn==2.8.3+cu12...` found nothing to install. The profile names the version the wheel holds, and the
wheelhouse keeps the file under it; the role is run for real on such a wheel (pip, offline, a venv under
tmp_path)."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest
import yaml
from role_play import run_play, task_output
from test_image_validate import _wheel
from test_kt_python_env_rerun import ENV, _setup

from ktinfra import envcheck, profiles

FLASH = "flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"


def test_the_legacy_flash_attn_wheel_is_pinned_and_kept_as_the_version_it_holds():
    env = profiles.env_spec(profiles.load_profile("kt-0.4-autodl"), "sft")
    flash = next(w for w in env["wheels"] if w["name"] == "flash-attn")
    assert (flash["file"], flash["version"]) == (FLASH, "2.8.3")
    assert flash["wheelhouse_file"] == "flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl"
    assert profiles.pins(env)["flash-attn"] == "2.8.3"
    # a freeze of the seeds' install (pip prints the METADATA version) is no drift
    freeze = "flash_attn==2.8.3\nktransformers==0.4.2+cu128torch27fancy\ntorch==2.7.1+cu128\n"
    assert not [p for p in profiles.freeze_drift(env, freeze) if "flash" in p]
    # ktransformers' wheels hold their whole version (built with KTRANSFORMERS_FORCE_BUILD): name kept
    kt = next(w for w in env["wheels"] if w["name"] == "ktransformers")
    assert kt["wheelhouse_file"] == kt["file"] and kt["version"] == "0.4.2+cu128torch27fancy"


def test_an_override_with_another_build_of_the_release_keeps_the_profiles_version(tmp_path):
    other = tmp_path / FLASH.replace("abiTRUE", "abiFALSE")
    other.write_bytes(b"not read: only hashed")
    digest = hashlib.sha256(other.read_bytes()).hexdigest()
    result = envcheck.check_install(
        profiles.load_profile("kt-0.4-autodl"),
        ["sft"],
        root=tmp_path / "envs",
        wheelhouse=tmp_path / "wh",
        wheel_overrides={"flash-attn": {"path": str(other), "sha256": digest}},
    )
    flash = next(w for w in result["envs"][0]["wheels"] if w["name"] == "flash-attn")
    assert (flash["file"], flash["version"]) == (other.name, "2.8.3")
    assert flash["wheelhouse_file"] == "flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl"
    assert not [p for p in result["problems"] if "flash-attn" in p], result["problems"]
    # a sha256-only override keeps the file and the version
    result = envcheck.check_install(
        profiles.load_profile("kt-0.4-autodl"),
        ["sft"],
        root=tmp_path / "envs",
        wheelhouse=tmp_path / "wh",
        wheel_overrides={"flash-attn": {"sha256": "ab" * 32}},
    )
    flash = next(w for w in result["envs"][0]["wheels"] if w["name"] == "flash-attn")
    assert (flash["file"], flash["version"]) == (FLASH, "2.8.3")


def _site(tmp_path, wheel: dict) -> str:
    profile = {"name": "site", "generation": "current", "python": "3.11",
               "envs": {"inference": {"name": "probe", "wheels": [wheel]}}}  # fmt: skip
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(profile))
    return str(path)


@pytest.mark.parametrize("version", ["../../etc/x", "2.8.3-1", "", "2.8.3 "])
def test_a_wheel_version_that_is_no_file_name_version_is_refused(tmp_path, version):
    """It becomes part of the wheel's file name in the wheelhouse: a "/" wrote outside it."""
    wheel = {"name": "w", "file": "w-1.0-py3-none-any.whl", "version": version}
    with pytest.raises(profiles.UnknownProfileError, match=r"wheels\[0\]\.version must be a version"):
        profiles.load_profile(_site(tmp_path, wheel))


def test_a_wheel_file_with_a_folder_is_kept_inside_the_wheelhouse(tmp_path):
    wheel = {"name": "w", "file": "../../tmp/w-1.0-py3-none-any.whl", "url": "https://m/w.whl"}
    env = profiles.env_spec(profiles.load_profile(_site(tmp_path, wheel)), "inference")
    assert env["wheels"][0]["wheelhouse_file"] == "w-1.0-py3-none-any.whl"


@pytest.mark.slow
def test_the_role_installs_a_wheel_renamed_after_its_build_offline_and_finds_no_drift(tmp_path):
    """Before: the requirements said ktfaprobe==1.0+cu12torch2.7cxx11abiTRUE and pip discarded the only wheel
    (has inconsistent version: expected '1.0+cu12torch2.7cxx11abitrue', but metadata has '1.0')."""
    built = tmp_path / "built"
    built.mkdir()
    path = _wheel(built, "ktfaprobe", {"ktfaprobe/__init__.py": b"BUILD = 'release'\n"}, version="1.0")
    renamed = path.with_name("ktfaprobe-1.0+cu12torch2.7cxx11abiTRUE-py3-none-any.whl")
    path.rename(renamed)
    extra = _setup(tmp_path, "six")
    wheel = {"name": "ktfaprobe", "file": renamed.name, "path": str(renamed), "version": "1.0",
             "sha256": hashlib.sha256(renamed.read_bytes()).hexdigest()}  # fmt: skip
    profile = yaml.safe_load((tmp_path / "profile.yaml").read_text())
    profile["envs"]["inference"].update(packages=[], wheels=[wheel])
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile))
    # the env as `ktinfra profile check --json` resolves it for the role
    plan = envcheck.check_install(
        profiles.load_profile(str(tmp_path / "profile.yaml")),
        ["inference"],
        root=tmp_path,
        wheelhouse=tmp_path / "wh",
    )
    assert plan["problems"] == [], plan["problems"]
    (spec,) = json.loads(json.dumps(plan["envs"]))
    extra["kt_python_env_spec"] = spec | {"prefix": str(tmp_path / "env")}
    extra["kt_python_env_offline"] = True
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0, output[-3000:]
    assert (tmp_path / "wh" / "ktfaprobe-1.0-py3-none-any.whl").read_bytes() == renamed.read_bytes()
    build = [tmp_path / "env" / "bin" / "python", "-c", "import ktfaprobe; print(ktfaprobe.BUILD)"]
    assert subprocess.check_output(build, text=True).strip() == "release"
    assert "ktfaprobe==1.0\n" in (tmp_path / "env" / "ktinfra-freeze.txt").read_text()
    rc, output = run_play(tmp_path, ENV, extra)
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert task_output(output, "Install the wheel files") == ""
