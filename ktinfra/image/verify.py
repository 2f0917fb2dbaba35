"""`ktinfra image verify`: boot a built docker image with systemd and run testinfra against it.

The same suites run against an instance booted from the AMI: `pytest tests/infra --hosts=ssh://ubuntu@HOST`.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ktinfra.image import OUT_ROOT, REPO_ROOT, ImageError, dockercli
from ktinfra.image import manifest as manifest_mod

HOST_SUITE = REPO_ROOT / "tests" / "infra"
# Not named test_*.py so that `pytest tests/integration/image` does not collect it without a container.
IMAGE_SUITE = REPO_ROOT / "tests" / "integration" / "image" / "testinfra" / "image_checks.py"


def find_manifest(image_id: str, out_root: Path = OUT_ROOT) -> Path | None:
    """The manifest of the build that made image_id; manifests that cannot be read are passed over."""
    for path in sorted(out_root.glob("*/manifest.json")):
        if path.parent.name.startswith("."):  # a previous build publish() could not remove (.NAME.old-*)
            continue
        try:
            if manifest_mod.field(manifest_mod.read(path), "image.id", (str,), path) == image_id:
                return path
        except ImageError:
            continue
    return None


def load_manifest(path: Path) -> dict:
    """A manifest verify can fill the host suite's options from, or ImageError saying what is wrong."""
    data = manifest_mod.read(path)
    manifest_mod.field(data, "profile.name", (str,), path)
    manifest_mod.field(data, "profile.ref", (str,), path, default=None)
    for name in manifest_mod.field(data, "envs", (dict,), path):
        for key in ("prefix", "python"):
            manifest_mod.field(data, f"envs.{name}.{key}", (str,), path)
        manifest_mod.field(data, f"envs.{name}.role", (str,), path, default=None)
    return data


def suite_args(suite: Path, manifest: dict | None, role: str) -> list[str]:
    """Options of the KT host suite (tests/infra) filled from the manifest; other suites take none."""
    if suite.resolve() != HOST_SUITE.resolve() or manifest is None:
        return []
    args = ["--kt-role", role, "--kt-profile", manifest["profile"].get("ref") or manifest["profile"]["name"]]
    for env in manifest["envs"].values():
        # the env's role (a site profile names its envs as it likes); manifests before it: the shipped name
        inference = env["role"] == "inference" if env.get("role") else env["prefix"].endswith("kt-kernel")
        args += ["--kt-python" if inference else "--kt-sft-python", env["python"]]
    return args


def wait_for_systemd(name: str, timeout_s: float = 90) -> str:
    deadline = time.monotonic() + timeout_s
    state = "unknown"
    while time.monotonic() < deadline:
        state = dockercli.exec_(name, "systemctl", "is-system-running").stdout.strip() or "starting"
        if state in ("running", "degraded"):
            return state
        time.sleep(1)
    raise ImageError(f"systemd in {name} did not come up in {timeout_s:.0f} s (state: {state})")


def verify(
    image: str,
    suites: list[Path] | None = None,
    manifest: Path | None = None,
    role: str = "any",
    on_line: Callable[[str], None] | None = None,
    out_root: Path = OUT_ROOT,
) -> dict:
    # a manifest or suite given on the command line is checked before docker is asked anything
    data = load_manifest(manifest) if manifest else None
    suites = suites or [s for s in (HOST_SUITE, IMAGE_SUITE) if s.exists()]
    # pytest runs in the checkout (REPO_ROOT): paths relative to the caller's directory are made absolute
    suites = [Path(s).resolve() for s in suites]
    manifest = manifest.resolve() if manifest else None
    out_root = out_root.resolve()
    missing = [str(s) for s in suites if not Path(s).exists()]
    if missing:
        raise ImageError(f"testinfra suite not found: {', '.join(missing)}")
    dockercli.ensure_daemon()
    info = dockercli.image_info(image)
    if info is None:
        raise ImageError(f"no docker image {image!r} here (see `ktinfra image list`)")
    if manifest is None:
        # without one every check of the host suite fails, which reads as a broken image
        manifest = find_manifest(info["id"], out_root)
        if manifest is None:
            raise ImageError(
                f"no build manifest of {image} ({info['id'][:19]}) under {out_root}: pass --out with the "
                "build's --out, or --manifest PATH (a later build of the same profile and source replaces "
                "the build directory)"
            )
        data = load_manifest(manifest)
    name = f"image-verify-{secrets.token_hex(3)}"
    env = dict(os.environ, KTINFRA_IMAGE_MANIFEST=str(manifest), KTINFRA_IMAGE_CONTAINER=name)
    results = []
    dockercli.run_detached(image, name, dockercli.SYSTEMD_RUN_ARGS)
    try:
        state = wait_for_systemd(name)
        for suite in suites:
            cmd = [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                "-rs",
                f"--hosts=docker://{name}",
                str(suite),
                *suite_args(Path(suite), data, role),
            ]
            proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
            if on_line:
                on_line(proc.stdout[-6000:] + proc.stderr[-2000:])
            last = (proc.stdout.strip().splitlines() or [""])[-1]
            results.append({"suite": str(suite), "rc": proc.returncode, "summary": last.strip("= ")})
    finally:
        dockercli.remove_container(name)
    passed = bool(results) and all(r["rc"] == 0 for r in results)
    summary = "; ".join(f"{Path(r['suite']).name}: {r['summary']}" for r in results)
    return {
        "image": image,
        "image_id": info["id"],
        "manifest": str(manifest),
        "systemd": state,
        "suites": results,
        "passed": passed,
        "summary": re.sub(r"\s+", " ", summary),
    }
