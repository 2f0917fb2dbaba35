"""The few docker CLI calls image builds and verification need."""

from __future__ import annotations

import json
import shutil
import subprocess

from ktinfra.image import ImageError

SYSTEMD_RUN_ARGS = [
    "--tmpfs",
    "/run",
    "--tmpfs",
    "/run/lock",
    "-v",
    "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--cgroupns=host",
]


def _docker(*args: str, check: bool = True, timeout_s: float | None = None) -> subprocess.CompletedProcess:
    if not shutil.which("docker"):
        raise ImageError("docker is not installed or not on PATH: run `bash scripts/docker-ready.sh`")
    try:
        proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ImageError(f"docker {args[0]} gave no answer in {timeout_s:g} s") from None
    if check and proc.returncode != 0:
        raise ImageError(f"docker {args[0]} failed: {proc.stderr.strip()[-400:]}")
    return proc


def ensure_daemon() -> None:
    if _docker("info", "--format", "{{.ServerVersion}}", check=False).returncode != 0:
        raise ImageError("the docker daemon is not reachable: run `bash scripts/docker-ready.sh`")


def image_info(ref: str) -> dict | None:
    # `--`: a ref such as --help (a typo'd --base-image or verify IMAGE) is an image name, not an option
    proc = _docker("image", "inspect", "--", ref, check=False)
    if proc.returncode != 0:
        return None
    info = json.loads(proc.stdout)[0]
    return {
        "id": info["Id"],
        "size_bytes": info["Size"],
        "tags": info.get("RepoTags") or [],
        "labels": (info.get("Config") or {}).get("Labels") or {},
        "created": info.get("Created"),
    }


def remove_container(name: str) -> None:
    """ImageError naming the container and docker's answer when `docker rm -f` fails: the container (a
    build's or verify's, systemd and all) would go on running. One that is not there is no error."""
    proc = _docker("rm", "-f", "-v", name, check=False)
    answer = proc.stderr.strip()
    if proc.returncode != 0 and "no such container" not in answer.lower():
        raise ImageError(
            f"docker container {name} could not be removed ({answer[-400:] or f'exit {proc.returncode}'}); "
            f"it is left: `docker rm -f {name}`"
        )


def run_detached(image: str, name: str, args: list[str]) -> None:
    _docker("run", "-d", "--name", name, *args, image)


def exec_(name: str, *cmd: str, timeout_s: float | None = None) -> subprocess.CompletedProcess:
    """ImageError when timeout_s passes first (the docker client is killed; the command may go on inside)."""
    return _docker("exec", name, *cmd, check=False, timeout_s=timeout_s)


def list_images(label: str) -> list[dict]:
    proc = _docker("images", "--filter", f"label={label}", "--format", "{{json .}}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
