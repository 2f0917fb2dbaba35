"""`ktinfra doctor`'s pin check against real venvs whose site-packages hold a distribution twice (two
NAME-VERSION.dist-info, as an interrupted or mixed pip/conda install leaves them)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from test_doctor_envs import SFT_PINS, WHEELS_OK, make_env, sft_pins_check

from ktinfra import doctor


def add_dist(python: Path, name: str, version: str) -> Path:
    site = next(python.parents[1].glob("lib/python*/site-packages"))
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return site


def test_a_distribution_installed_twice_in_one_site_dir_fails(tmp_path):
    """importlib reports whichever dist-info it finds first: with the pinned torch 2.7.1 and a stale 2.5.0
    beside it the check passed or failed by directory order, and never said why."""
    python = make_env(tmp_path / "sft", {**SFT_PINS, **WHEELS_OK}, ("llamafactory",))
    site = add_dist(python, "torch", "2.5.0")
    check = sft_pins_check(python)
    assert check.status == "failed", check
    problems = check.message.split(": ", 1)[1].split("; ")
    assert problems == [
        f"torch is installed 2 times in {os.path.realpath(site)} (2.5.0, 2.7.1): its files are "
        "a mix of them: pip uninstall torch until none is left, then install torch==2.7.1"
    ]


def test_a_local_version_build_beside_the_plain_one_is_installed_twice_too(tmp_path):
    python = make_env(tmp_path / "sft", {**SFT_PINS, **WHEELS_OK}, ("llamafactory",))
    add_dist(python, "torch", "2.7.1+cu128")
    check = sft_pins_check(python)
    assert check.status == "failed" and "torch is installed 2 times" in check.message, check


def test_one_copy_reached_twice_through_sys_path_is_not_a_duplicate(tmp_path, monkeypatch):
    """The env's site-packages also on PYTHONPATH through a link: one dist-info seen from two sys.path
    entries (site.py drops only entries that are the same path as written)."""
    python = make_env(tmp_path / "sft", {**SFT_PINS, **WHEELS_OK, "torch": "2.7.1+cu128"}, ("llamafactory",))
    site = next(python.parents[1].glob("lib/python*/site-packages"))
    (tmp_path / "link").symlink_to(site)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "link"))
    path = subprocess.run([str(python), "-c", "import sys; print(sys.path)"], capture_output=True, text=True)
    assert str(tmp_path / "link") in path.stdout and str(site) in path.stdout
    check = sft_pins_check(python)
    assert check.status == "passed", check


def test_the_suite_reports_the_copies_in_the_run_json(tmp_path):
    """The whole CLI path: --json carries the failure with the site dir, exit 1."""
    python = make_env(tmp_path / "sft", {**SFT_PINS, **WHEELS_OK}, ("llamafactory",))
    add_dist(python, "flash_attn", "2.5.0")
    report = doctor.run(["local://"], "any", "kt-0.4-autodl", sft_python=str(python), select="pins and sft")
    assert not report.ok
    [check] = report.to_dict()["checks"]
    assert "flash-attn is installed 2 times" in check["message"] and "(2.5.0, 2.8.3)" in check["message"]


def test_a_dist_info_left_without_metadata_beside_the_real_one_is_named_not_a_crash(tmp_path):
    """A leftover torch-2.5.0.dist-info holding only RECORD: its version is unknown ('?')."""
    python = make_env(tmp_path / "sft", {**SFT_PINS, **WHEELS_OK}, ("llamafactory",))
    site = add_dist(python, "torch", "2.5.0")
    (site / "torch-2.5.0.dist-info" / "METADATA").unlink()
    (site / "torch-2.5.0.dist-info" / "RECORD").write_text("torch/__init__.py,,\n")
    check = sft_pins_check(python)
    assert check.status == "failed", check
    assert "torch is installed 2 times" in check.message and "(2.7.1, ?)" in check.message, check
