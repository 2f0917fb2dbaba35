"""A Debian 12 container whose PID 1 is systemd, as this machine can run one (a cgroup v1 host, where
--privileged fails): the integration tests that need a real systemd start it here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ktinfra.image.dockercli import SYSTEMD_RUN_ARGS  # the run options `image verify` boots images with

IMAGE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")
ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def systemd_box(prefix: str, docker_args: Sequence[str] = (), image: str = IMAGE) -> Iterator[str]:
    """The container's name once systemd says running or degraded; removed afterwards whatever happened."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "run", "-d", "--name", name, *SYSTEMD_RUN_ARGS, *docker_args, image],
                   check=True, capture_output=True)  # fmt: skip
    try:
        state = ""
        for _ in range(60):
            probe = ["docker", "exec", name, "systemctl", "is-system-running"]
            state = subprocess.run(probe, capture_output=True, text=True).stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(1)
        assert state in ("running", "degraded"), f"systemd in {name} is {state!r} after 60 s"
        yield name
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


@contextmanager
def plain_box(prefix: str, setup: str, image: str = IMAGE) -> Iterator[str]:
    """A container whose PID 1 is `sleep` (no systemd: kt_serve's supervisord shape), `setup` run in it by sh;
    its name, removed afterwards whatever happened."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "run", "-d", "--name", name, "--entrypoint", "sleep", image, "infinity"],
                   check=True, capture_output=True)  # fmt: skip
    try:
        box_sh(name, setup)
        yield name
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def box_sh(box: str, command: str) -> str:
    """`sh -c COMMAND` in the container; its stdout (CalledProcessError when it fails)."""
    return subprocess.run(["docker", "exec", box, "sh", "-c", command], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def doctor_checks(target: str, *args: str) -> tuple[int, dict[str, dict]]:
    """`ktinfra doctor --hosts docker://TARGET --role any ARGS --json` (TARGET: a container or
    USER@container): its exit status and its checks by id."""
    res = subprocess.run(
        [sys.executable, "-m", "ktinfra", "doctor", "--hosts", f"docker://{target}", "--role", "any", *args,
         "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert res.stdout, res.stderr[-3000:]
    return res.returncode, {check["id"]: check for check in json.loads(res.stdout)["checks"]}
