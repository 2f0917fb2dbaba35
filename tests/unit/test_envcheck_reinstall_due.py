"""envcheck's "reinstall due" is kt_python_env's own decision (tasks/env.yml, "Decide whether to install"):
the requirements it writes now differ from those of the last install that finished, there is no such
record, or an install of other requirements was cut off. Before, envcheck compared the profile's pins with
the env's freeze only: a wheel rebuilt under the same version (new sha256) or a git source moved to another
ref, which the role installs again, counted no disk ("no problems" on a full disk); an env off its pins
whose requirements did not change, which the role does not install again, counted its disk."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

from installed_env import STATE_FILES, record_install
from role_play import REPO, run_play

from ktinfra import envcheck, profiles

GB = 10**9
SHA_A, SHA_B = "a" * 64, "b" * 64
WHEEL = "kt_kernel-0.7.2-cp311-cp311-manylinux_2_35_x86_64.whl"


def _profile(disk: int = GB, download: int = GB) -> dict:
    return {
        "name": "site",
        "generation": "current",
        "python": ["3.11"],
        "envs": {
            "inference": {
                "name": "inf",
                "packages": ["torch==2.9.1", "ktransformers[sft]==0.7.2", "numpy<3; python_version >= '3'"],
                "wheels": [
                    {"name": "kt-kernel", "file": WHEEL, "url": f"https://m/{WHEEL}", "sha256": SHA_A}
                ],
                "git": [
                    {"name": "LLaMA-Factory", "repo": "https://github.com/h/LLaMA-Factory.git", "ref": "v1"}
                ],
                "disk_bytes": disk,
                "download_bytes": download,
            }
        },
    }


def _check(tmp_path: Path, profile: dict) -> dict:
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="venv"
    )
    (env,) = result["envs"]
    return env | {"need": sum(d["need_bytes"] for d in result["disks"]), "problems": result["problems"]}


def _installed(tmp_path: Path, freeze: str | None = None) -> Path:
    prefix = tmp_path / "envs" / "inf"
    record_install(prefix, _profile(), "inference", freeze)
    return prefix


def test_the_requirements_are_those_the_role_writes(tmp_path):
    """The role's template, rendered by Ansible, is envcheck's requirements_text after its first line."""
    profile = _profile()
    profile["envs"]["inference"]["conda_patches"] = [
        {"channel": "conda-forge", "packages": ["libstdcxx-ng>=12"]}
    ]
    profile["envs"]["inference"]["git"].append(
        {"name": "x", "repo": "git@h:x.git", "subdir": "py", "editable": False, "extras": ["a", "b"]}
    )
    env = profiles.env_spec(profile, "inference")
    out = tmp_path / "requirements.txt"
    template = REPO / "roles/kt_python_env/templates/requirements.txt.j2"
    task = {"ansible.builtin.template": {"src": str(template), "dest": str(out), "mode": "0644"}}
    extra = {"kt_python_env_install": {"profile": "site"}, "kt_python_env_spec": env}
    rc, output = run_play(tmp_path, [task], extra)
    assert rc == 0, output[-3000:]
    header, _, rest = out.read_text().partition("\n")
    assert header.startswith("# ") and rest == envcheck.requirements_text("site", env)


def test_the_record_files_are_those_the_role_keeps():
    files = (envcheck.REQUIREMENTS_FILE, envcheck.INSTALLED_FILE, envcheck.FREEZE_FILE)
    assert files == (STATE_FILES["requirements"], STATE_FILES["installed"], STATE_FILES["freeze"])


def test_an_env_installed_at_these_requirements_is_not_due(tmp_path):
    _installed(tmp_path)
    env = _check(tmp_path, _profile(disk=shutil.disk_usage(tmp_path).free + GB))
    assert (env["reinstall_due"], env["reinstall_reasons"], env["need"], env["problems"]) == (
        False,
        [],
        0,
        [],
    )


def test_a_rebuilt_wheel_makes_the_reinstall_due_and_counts_disk(tmp_path):
    _installed(tmp_path)
    profile = _profile(disk=shutil.disk_usage(tmp_path).free + GB)
    profile["envs"]["inference"]["wheels"][0]["sha256"] = SHA_B
    env = _check(tmp_path, profile)
    assert env["reinstall_due"]
    (reason,) = env["reinstall_reasons"]
    assert (reason["kind"], reason["package"], reason["old_sha256"], reason["new_sha256"]) == (
        "wheel",
        "kt-kernel",
        SHA_A,
        SHA_B,
    )
    assert any(p.startswith("disk too small") for p in env["problems"]), env["problems"]


def test_a_moved_git_ref_makes_the_reinstall_due(tmp_path):
    _installed(tmp_path)
    profile = _profile()
    profile["envs"]["inference"]["git"][0]["ref"] = "v2"
    env = _check(tmp_path, profile)
    assert env["reinstall_due"] and env["need"] > 0
    (reason,) = env["reinstall_reasons"]
    assert reason | {"text": None} == {
        "kind": "git",
        "source": "LLaMA-Factory",
        "old_ref": "v1",
        "new_ref": "v2",
        "text": None,
    }
    assert reason["text"] == "git source LLaMA-Factory moved: v1 -> v2"


def test_a_bumped_pin_says_old_and_new(tmp_path):
    _installed(tmp_path)
    profile = copy.deepcopy(_profile())
    profile["envs"]["inference"]["packages"][0] = "torch==2.9.2"
    profile["envs"]["inference"]["packages"].append("torchaudio==2.9.2")
    env = _check(tmp_path, profile)
    assert [r["text"] for r in env["reinstall_reasons"]] == [
        "torch 2.9.1 -> 2.9.2",
        "torchaudio (not pinned) -> 2.9.2",
    ]
    assert [(r["old"], r["new"]) for r in env["reinstall_reasons"]] == [("2.9.1", "2.9.2"), (None, "2.9.2")]


def test_an_env_without_a_record_of_a_finished_install_is_due(tmp_path):
    """An env installed before the record existed (the role's cmp exits 2): installed once more."""
    prefix = _installed(tmp_path)
    (prefix / STATE_FILES["installed"]).unlink()
    env = _check(tmp_path, _profile())
    assert [r["kind"] for r in env["reinstall_reasons"]] == ["no_record"] and env["need"] > 0


def test_an_install_cut_off_with_other_requirements_is_due(tmp_path):
    """A pin bump whose install failed, then the profile put back: the written requirements differ."""
    prefix = _installed(tmp_path)
    (prefix / STATE_FILES["requirements"]).write_text("# Ansible managed\ntorch==2.9.2\n")
    env = _check(tmp_path, _profile())
    assert [r["kind"] for r in env["reinstall_reasons"]] == ["unfinished"] and env["need"] > 0


def test_an_env_off_its_pins_whose_requirements_did_not_change_is_not_due(tmp_path):
    """The role does not install it again (its pin check fails instead): no disk for it."""
    _installed(tmp_path, freeze="torch==2.8.0\nktransformers==0.7.2\n")
    env = _check(tmp_path, _profile(disk=shutil.disk_usage(tmp_path).free + GB))
    assert (env["reinstall_due"], env["need"], env["problems"]) == (False, 0, [])
