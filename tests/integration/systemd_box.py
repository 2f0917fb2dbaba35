"""A Debian 12 container whose PID 1 is systemd, as this machine can run one (a cgroup v1 host, where
--privileged fails): the integration tests that need a real systemd start it here."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ktinfra.image.dockercli import SYSTEMD_RUN_ARGS  # the run options `image verify` boots images with

IMAGE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")


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


def box_sh(box: str, command: str) -> str:
    """`sh -c COMMAND` in the container; its stdout (CalledProcessError when it fails)."""
    return subprocess.run(["docker", "exec", box, "sh", "-c", command], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
