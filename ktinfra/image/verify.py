"""`ktinfra image verify`: boot a built docker image with systemd and run testinfra against it.

The same suites run against an instance booted from the AMI: `pytest tests/infra --hosts=ssh://ubuntu@HOST`.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ktinfra.image import OUT_ROOT, REPO_ROOT, ImageError, dockercli
from ktinfra.image import manifest as manifest_mod
from ktinfra.image.signals import sigterm_unwinds
from ktinfra.image.suite_progress import PROGRESS_ENV

HOST_SUITE = REPO_ROOT / "tests" / "infra"
# Not named test_*.py so that `pytest tests/integration/image` does not collect it without a container.
IMAGE_SUITE = REPO_ROOT / "tests" / "integration" / "image" / "testinfra" / "image_checks.py"
# one suite's time limit: the host suite on the full kt-0.7 image takes minutes (it imports the envs' torch);
# a check that waits for ever (a GPU probe, a network call in an offline image) must not hang verify
SUITE_TIMEOUT_S = 1200
MAX_SUITE_TIMEOUT_S = 86400
STOP_GRACE_S = 5  # SIGTERM to a timed-out suite's process group, then SIGKILL


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
    """Options of the KT host suite (tests/infra, or a file or folder of it) filled from the manifest; other
    suites take none."""
    host_suite = HOST_SUITE.resolve()
    if manifest is None or not (suite.resolve() == host_suite or host_suite in suite.resolve().parents):
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
    while (left := deadline - time.monotonic()) > 0:
        # bounded: a systemctl that never answers (a wedged PID 1) hung verify before any suite ran
        try:
            answer = dockercli.exec_(name, "systemctl", "is-system-running", timeout_s=min(left, 10) + 0.5)
        except ImageError:
            state = "systemctl gave no answer"
            continue
        state = answer.stdout.strip() or "starting"
        if state in ("running", "degraded"):
            return state
        time.sleep(1)
    raise ImageError(f"systemd in {name} did not come up in {timeout_s:.0f} s (state: {state})")


@dataclass
class SuiteRun:
    rc: int
    stdout: str
    stderr: str
    timed_out: bool = False
    running: str | None = None  # the test running when the time limit stopped the suite ("" for none)


def run_suite(cmd: list[str], env: dict, timeout_s: float) -> SuiteRun:
    """cmd (a pytest) in a process group of its own; past timeout_s the whole group is stopped (pytest and
    the docker exec clients it started), and so it is on an interrupt (Ctrl-C) of verify."""
    with tempfile.TemporaryDirectory(prefix="ktinfra-verify-") as tmp:
        progress = Path(tmp) / "running"
        proc = subprocess.Popen(
            [*cmd, "-p", "ktinfra.image.suite_progress"],
            cwd=REPO_ROOT,
            env={**env, PROGRESS_ENV: str(progress)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
            return SuiteRun(proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            out, err = _leftover_output(proc)
            running = progress.read_text() if progress.exists() else ""
            return SuiteRun(proc.returncode, out, err, timed_out=True, running=running)
        except BaseException:
            _stop_group(proc)
            raise


def _stop_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:  # whatever is left of the group, pytest included when it did not end on SIGTERM
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _leftover_output(proc: subprocess.Popen) -> tuple[str, str]:
    """What the stopped suite wrote; a process that left its group may still hold the pipes: not waited on."""
    try:
        return proc.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired as exc:
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
        text = exc.output.decode(errors="replace") if isinstance(exc.output, bytes) else exc.output or ""
        return text, ""


def _remove_after(name: str, failed: BaseException, on_line) -> None:
    """Remove the container after `failed` stopped verify; a container left is said (on_line, else stderr),
    never in place of verify's own error or its Ctrl-C / SIGTERM exit."""
    try:
        dockercli.remove_container(name)
    except ImageError as left:
        said = f"warning: {left} (after: {str(failed) or type(failed).__name__})"
        if on_line:
            on_line(said)
        else:
            print(said, file=sys.stderr)


def check_timeout(timeout_s: float) -> float:
    if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s)) or not (
        0 < timeout_s <= MAX_SUITE_TIMEOUT_S
    ):
        raise ImageError(f"suite timeout {timeout_s!r} s: give seconds from 1 to {MAX_SUITE_TIMEOUT_S}")
    return timeout_s


def _suite_result(suite: Path, run: SuiteRun, timeout_s: float) -> dict:
    if run.timed_out:
        where = f"in {run.running}" if run.running else "with no test running (collection or teardown)"
        summary = f"timed out after {timeout_s:g} s {where}; its processes were stopped"
    else:
        summary = (run.stdout.strip().splitlines() or [""])[-1].strip("= ")
    return {
        "suite": str(suite),
        "rc": run.rc,
        "summary": summary,
        "timed_out": run.timed_out,
        "running": run.running if run.timed_out else None,
    }


def verify(
    image: str,
    suites: list[Path] | None = None,
    manifest: Path | None = None,
    role: str = "any",
    on_line: Callable[[str], None] | None = None,
    out_root: Path = OUT_ROOT,
    suite_timeout_s: float = SUITE_TIMEOUT_S,
) -> dict:
    # a manifest, suite or timeout given on the command line is checked before docker is asked anything
    check_timeout(suite_timeout_s)
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
    built = data.get("image", {}).get("id") if isinstance(data.get("image"), dict) else None
    if isinstance(built, str) and built != info["id"]:
        # the image checks would compare another build's pins, and read another image's files (by its id)
        raise ImageError(
            f"manifest {manifest} is of image {built[:19]}, not of {image} ({info['id'][:19]}): pass the "
            "manifest of this image's build, or leave --manifest out to look it up under --out"
        )
    name = f"image-verify-{secrets.token_hex(3)}"
    env = dict(os.environ, KTINFRA_IMAGE_MANIFEST=str(manifest), KTINFRA_IMAGE_CONTAINER=name)
    results = []
    # a `docker run` that fails to start the container (or is interrupted) has created it already
    with sigterm_unwinds():
        try:
            dockercli.run_detached(image, name, dockercli.SYSTEMD_RUN_ARGS)
            state = wait_for_systemd(name)
            for number, suite in enumerate(suites):
                if number and results[-1]["timed_out"]:
                    # the hung check's command runs on inside the container (stopping its `docker exec`
                    # client does not stop it): the next suite gets a fresh container of the image
                    dockercli.remove_container(name)
                    dockercli.run_detached(image, name, dockercli.SYSTEMD_RUN_ARGS)
                    state = wait_for_systemd(name)
                    if on_line:
                        on_line(f"{Path(suite).name} runs in a fresh container of {image}")
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
                run = run_suite(cmd, env, suite_timeout_s)
                results.append(_suite_result(suite, run, suite_timeout_s))
                if on_line:
                    on_line(run.stdout[-6000:] + run.stderr[-2000:])
                    if run.timed_out:
                        on_line(f"{Path(suite).name}: {results[-1]['summary']}")
        except BaseException as failed:
            _remove_after(name, failed, on_line)
            raise
        dockercli.remove_container(name)  # a container left is verify's error (exit 1)
    passed = bool(results) and all(r["rc"] == 0 and not r["timed_out"] for r in results)
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
