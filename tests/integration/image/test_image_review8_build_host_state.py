"""cleanup.sh leaves no report of the build machine and no download settings folder in the image.

A smoke image built by `ktinfra image build` (playbooks/image.yml) held /var/lib/ktinfra/tuning.json, written
by kt_host_tuning in the build container: `container: true`, vm.swappiness `not_set` ("cannot write
/proc/sys/vm/swappiness: Read-only file system"), /dev/shm "permission denied". Every host booted from the
image read that as its own tuning outcome, while its sysctl.d/limits.d files apply at boot. It also held the
empty 0700 folders kt_common's settings file lives in while a download runs (/opt/kt/envs/.ktinfra-run.0,
/opt/ktinfra/.ktinfra-run.0, /opt/ktinfra/tool/.ktinfra-run.0). Run in a throwaway container of the base
image (the script deletes system files)."""

from __future__ import annotations

import os
import subprocess

import pytest

from ktinfra.image import REPO_ROOT

BASE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")
SCRIPT = REPO_ROOT / "images" / "scripts" / "cleanup.sh"
BUILD_STATE = [
    "/var/lib/ktinfra/tuning.json",
    "/var/lib/ktinfra/host-tuning.json",
    "/opt/kt/envs/.ktinfra-run.0/downloads.build.sh",
    "/opt/ktinfra/tool/.ktinfra-run.0",
    "/opt/ktinfra/.ktinfra-run.0",
]
KEPT = [
    "/opt/kt/envs/kt-kernel/ktinfra-freeze.txt",
    "/etc/sysctl.d/90-ktinfra.conf",
    "/var/lib/ktinfra/serve",
]


def left_after_cleanup() -> list[str]:
    files = [p for p in BUILD_STATE + KEPT if p.endswith((".json", ".sh", ".txt", ".conf"))]
    dirs = [p for p in BUILD_STATE + KEPT if p not in files]
    seed = " && ".join(
        [f"mkdir -p {' '.join(dirs)}"] + [f"mkdir -p {os.path.dirname(p)} && echo x > {p}" for p in files]
    )
    report = "for p in " + " ".join(BUILD_STATE + KEPT) + '; do [ -e "$p" ] && echo "left: $p"; done; true'
    proc = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "/bin/sh", "-v", f"{SCRIPT}:/cleanup.sh:ro", BASE,
         "-c", f"{seed} && sh /cleanup.sh >/dev/null && {report}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return [line.removeprefix("left: ") for line in proc.stdout.splitlines()]


@pytest.fixture(scope="module", autouse=True)
def _base_image():
    if subprocess.run(["docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        pytest.fail(f"base image {BASE} missing: `make docker-ready` builds it")


def test_the_build_machine_state_goes_and_the_image_state_stays():
    assert left_after_cleanup() == KEPT
