"""Fresh-eyes review: `ktinfra image verify` waits for systemd in the container by polling `docker exec
systemctl is-system-running`, with a 90 s deadline that was checked only between polls: a systemctl that
never answered (a wedged PID 1; here a systemctl on PATH that sleeps) hung verify before any suite ran, with
no time limit and no message. Each poll is now bounded and the deadline holds. ~10 s (make image-test)."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from ktinfra.image import ImageError, dockercli, verify

BASE = "ktinfra/debian12-systemd:latest"
REPO = os.environ.get("KTINFRA_IMAGE_CI_REPO", "image-ci/kt")


@pytest.fixture
def wedged_container():
    """A booted container of the base image whose `systemctl` (first on docker exec's PATH) never returns."""
    image = f"{REPO}:verify-wedged-{os.getpid()}"
    dockerfile = (
        f"FROM {BASE}\n"
        "RUN printf '#!/bin/sh\\nexec sleep 600\\n' >/usr/local/bin/systemctl\n"
        "RUN chmod 755 /usr/local/bin/systemctl\n"
    )
    subprocess.run(["docker", "build", "-q", "-t", image, "-"], input=dockerfile, text=True, check=True)
    name = f"image-verify-wedged-{os.getpid()}"
    try:
        dockercli.run_detached(image, name, dockercli.SYSTEMD_RUN_ARGS)
        yield name
    finally:
        dockercli.remove_container(name)
        subprocess.run(["docker", "image", "rm", "-f", image], capture_output=True)


def test_a_systemctl_that_never_answers_ends_in_an_error(wedged_container):
    outcome: list[BaseException | str] = []

    def wait() -> None:
        try:
            outcome.append(verify.wait_for_systemd(wedged_container, timeout_s=4))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(timeout=40)
    assert not waiter.is_alive(), "wait_for_systemd still waits on a systemctl that never answers"
    (error,) = outcome
    assert isinstance(error, ImageError)
    assert (
        str(error)
        == f"systemd in {wedged_container} did not come up in 4 s (state: systemctl gave no answer)"
    )
