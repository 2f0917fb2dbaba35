"""Shared helpers for the render tests (no tests here): fixture plans, DIR snapshots, systemd verify."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

PLANS = Path(__file__).resolve().parent.parent / "fixtures" / "plans"
SYSTEM_UNITS = Path("/usr/lib/systemd/system")


def load_fixture_plan(name: str) -> dict:
    return json.loads((PLANS / name).read_text())


def render_train_here(plan: dict, tmp_path: Path, name: str = "r", output_dir: str = "/o"):
    """render_train with fixed paths, its python and LLaMA-Factory checkout absent from this machine."""
    from ktinfra.render.train import render_train

    return render_train(
        plan,
        name=name,
        model_path="/m",
        dataset="d",
        dataset_dir="/d",
        output_dir=output_dir,
        python=str(tmp_path / "absent" / "bin" / "python"),
        llamafactory_dir=str(tmp_path / "lf"),
    )


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under directory (hidden temp files included) with its content and mode."""
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mode & 0o777)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def make_systemd_root(root: Path) -> Path:
    """A filesystem root holding the distribution's units, so verify resolves sysinit.target & co."""
    target = root / "usr/lib/systemd/system"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SYSTEM_UNITS, target, symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
    return root


def unit_executables(unit_text: str) -> list[str]:
    """Absolute paths of the programs the unit's Exec*= lines run (first word, without prefixes)."""
    paths = []
    for line in unit_text.splitlines():
        match = re.match(r"^Exec\w+=[-+!@:]*(/\S+)", line)
        if match:
            paths.append(match.group(1))
    return paths


def install_executables(root: Path, paths: list[str]) -> None:
    for path in paths:
        exe = root / path.lstrip("/")
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)


def verify_unit(root: Path, unit_file: Path, instance: str) -> subprocess.CompletedProcess:
    """Install unit_file into root and run `systemd-analyze verify --root` on one instance of it."""
    shutil.copy(unit_file, root / "etc/systemd/system" / unit_file.name)
    unit = unit_file.name.replace("@.", f"@{instance}.")
    env = dict(os.environ, SYSTEMD_LOG_COLOR="0")
    return subprocess.run(
        ["systemd-analyze", "verify", f"--root={root}", unit],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
