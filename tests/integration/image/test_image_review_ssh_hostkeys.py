"""Fresh-eyes review of images/scripts/cleanup.sh: the ssh host keys it removes must come back at first boot.

cleanup.sh removes /etc/ssh/ssh_host_* (an image must not hand every instance the build's host keys), but
on a base without cloud-init nothing made them again: Debian's openssh-server makes them only in its
postinst, and ssh.service's `sshd -t` fails with "no hostkeys available", so an instance of the image had
no sshd. cleanup.sh now installs ktinfra-ssh-hostkeys.service (ssh-keygen -A before ssh.service, only while
no host key exists) where sshd is installed. Run for real: openssh-server from Debian's apt in a systemd
container of the base image, cleanup.sh, then the container restarted as an instance boots.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from ktinfra.image import REPO_ROOT, dockercli

BASE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")
SCRIPT = REPO_ROOT / "images" / "scripts" / "cleanup.sh"


def sh(name: str, command: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", "exec", name, "sh", "-c", command], capture_output=True, text=True, timeout=timeout
    )


def booted(name: str) -> None:
    """Waits until systemd in the container has finished booting (running or degraded)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = sh(name, "systemctl is-system-running 2>/dev/null || true").stdout.strip()
        if state in ("running", "degraded"):
            return
        time.sleep(1)
    pytest.fail(f"systemd in {name} did not finish booting: {state!r}")


@pytest.fixture
def container():
    name = f"ktinfra-review-ssh-{os.getpid()}"
    subprocess.run(
        ["docker", "run", "-d", "--name", name, *dockercli.SYSTEMD_RUN_ARGS, BASE, "/lib/systemd/systemd"],
        check=True,
        capture_output=True,
    )
    try:
        booted(name)
        yield name
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def restart(name: str) -> None:
    subprocess.run(["docker", "restart", name], check=True, capture_output=True, timeout=120)
    booted(name)


def ssh_state(name: str) -> str:
    """ssh.service's state once it has settled: sshd without host keys fails, restarts, then gives up."""
    deadline = time.monotonic() + 60
    while True:
        state = sh(name, "systemctl is-active ssh.service").stdout.strip()
        if state not in ("activating", "deactivating", "reloading") or time.monotonic() > deadline:
            return state + "\n" + sh(name, "systemctl status ssh.service --no-pager").stdout
        time.sleep(1)


def fingerprints(name: str) -> str:
    return sh(name, "for k in /etc/ssh/ssh_host_*_key.pub; do ssh-keygen -lf $k; done").stdout


def test_sshd_starts_on_the_first_boot_of_the_cleaned_image_with_its_own_keys(container):
    install = sh(
        container,
        "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends"
        " openssh-server",
    )
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    build_keys = fingerprints(container)
    assert "ED25519" in build_keys
    subprocess.run(["docker", "cp", str(SCRIPT), f"{container}:/cleanup.sh"], check=True)
    cleanup = sh(container, "sh /cleanup.sh")
    assert cleanup.returncode == 0, cleanup.stderr
    assert sh(container, "ls /etc/ssh/ssh_host_*").returncode != 0, "cleanup left host keys"

    restart(container)  # the first boot of an instance
    state = ssh_state(container)
    assert state.startswith("active\n"), state
    first_boot_keys = fingerprints(container)
    assert "ED25519" in first_boot_keys and "RSA" in first_boot_keys and "ECDSA" in first_boot_keys
    assert first_boot_keys != build_keys
    # sshd answers with the new key
    scan = sh(container, "ssh-keyscan -t ed25519 127.0.0.1 2>/dev/null | ssh-keygen -lf -")
    assert scan.stdout.split()[1] in first_boot_keys

    restart(container)  # later boots keep the instance's keys
    assert ssh_state(container).startswith("active\n")
    assert fingerprints(container) == first_boot_keys
    skipped = sh(container, "systemctl show -p ConditionResult ktinfra-ssh-hostkeys.service").stdout.strip()
    assert skipped == "ConditionResult=no"
    assert "ktinfra-ssh-hostkeys.service makes them at first boot" in cleanup.stdout


def test_no_unit_where_there_is_no_sshd(container):
    subprocess.run(["docker", "cp", str(SCRIPT), f"{container}:/cleanup.sh"], check=True)
    cleanup = sh(container, "sh /cleanup.sh")
    assert cleanup.returncode == 0, cleanup.stderr
    assert "ssh" not in cleanup.stdout
    assert sh(container, "ls /etc/systemd/system/ktinfra-ssh-hostkeys.service").returncode != 0
