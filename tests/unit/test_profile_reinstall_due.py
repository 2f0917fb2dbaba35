"""`ktinfra profile check` of an installed env that kt_python_env installs again (a pin bumped, a wheel
rebuilt, a git source moved): before, its summary said "installed", as for an env left as it is; it says
that a reinstall is due and why, and --json (strict JSON) has the same in reinstall_due and
reinstall_reasons of the env."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import yaml
from installed_env import record_install
from typer.testing import CliRunner

from ktinfra import envcheck
from ktinfra.cli import app

runner = CliRunner()
SHA_A, SHA_B = "a" * 64, "b" * 64
WHEEL = "kt_kernel-0.7.2-cp311-cp311-manylinux_2_35_x86_64.whl"
PROFILE = {
    "name": "site",
    "generation": "current",
    "python": "3.11",
    "envs": {
        "inference": {
            "name": "inf",
            "packages": ["torch==2.9.1", "six==1.16.0"],
            "wheels": [{"name": "kt-kernel", "file": WHEEL, "url": f"https://m/{WHEEL}", "sha256": SHA_A}],
            "git": [{"name": "LLaMA-Factory", "repo": "https://github.com/h/LLaMA-Factory.git", "ref": "v1"}],
        }
    },
}


def _check(tmp_path: Path, monkeypatch, profile: dict, *extra: str):
    monkeypatch.setattr(envcheck.shutil, "which", lambda name: sys.executable)  # a python for the venv
    monkeypatch.setattr(envcheck, "_disk_problems", lambda needs: ([], []))  # room on the disk
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump(profile))
    argv = ["profile", "check", str(site), "--env", "inference", "--manager", "venv"]
    argv += ["--root", str(tmp_path / "envs"), "--wheelhouse", str(tmp_path / "wh"), *extra]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0 and result.stderr == "", result.output
    return result.stdout


def _strict(text: str):
    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant} in the output")

    return json.loads(text, parse_constant=refuse)


def test_a_due_reinstall_is_said_with_its_reasons(tmp_path, monkeypatch):
    record_install(tmp_path / "envs" / "inf", PROFILE, "inference")
    bumped = copy.deepcopy(PROFILE)
    env = bumped["envs"]["inference"]
    env["packages"][0] = "torch==2.9.2"
    env["wheels"][0]["sha256"] = SHA_B
    env["git"][0]["ref"] = "v2"
    assert _check(tmp_path, monkeypatch, bumped).splitlines() == [
        f"{tmp_path / 'site.yaml'} inference: no problems (prefix {tmp_path / 'envs' / 'inf'}, "
        "reinstall due: torch 2.9.1 -> 2.9.2; "
        "wheel kt-kernel rebuilt: sha256 aaaaaaaaaaaa... -> bbbbbbbbbbbb...; "
        "git source LLaMA-Factory moved: v1 -> v2)"
    ]
    (planned,) = _strict(_check(tmp_path, monkeypatch, bumped, "--json"))["envs"]
    assert planned["installed"] and planned["reinstall_due"]
    reasons = planned["reinstall_reasons"]
    assert [r["kind"] for r in reasons] == ["pin", "wheel", "git"]
    assert (reasons[0]["package"], reasons[0]["old"], reasons[0]["new"]) == ("torch", "2.9.1", "2.9.2")
    assert (reasons[1]["old_sha256"], reasons[1]["new_sha256"]) == (SHA_A, SHA_B)
    assert (reasons[2]["old_ref"], reasons[2]["new_ref"]) == ("v1", "v2")


def test_an_env_left_as_it_is_is_installed(tmp_path, monkeypatch):
    record_install(tmp_path / "envs" / "inf", PROFILE, "inference")
    assert _check(tmp_path, monkeypatch, PROFILE).splitlines() == [
        f"{tmp_path / 'site.yaml'} inference: no problems (prefix {tmp_path / 'envs' / 'inf'}, installed)"
    ]
    (planned,) = _strict(_check(tmp_path, monkeypatch, PROFILE, "--json"))["envs"]
    assert (planned["installed"], planned["reinstall_due"], planned["reinstall_reasons"]) == (True, False, [])
