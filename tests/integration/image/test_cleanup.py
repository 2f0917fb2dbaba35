"""images/scripts/cleanup.sh, the image build's last step, run in a throwaway container of the local base
image (it deletes system files, so never on this machine): what a build leaves must not ship."""

from __future__ import annotations

import os
import subprocess

import pytest

from ktinfra.image import REPO_ROOT

BASE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")
SCRIPT = REPO_ROOT / "images" / "scripts" / "cleanup.sh"

# what a build (or the user who ran it) can leave behind, each with content
LEFT = [
    "/root/.ssh/authorized_keys",
    "/home/lab/.ssh/authorized_keys",
    "/root/.cache/huggingface/token",
    "/home/lab/.cache/huggingface/token",
    "/home/lab/.netrc",
    "/home/lab/.git-credentials",
    "/var/lib/cloud/instances/i-0123/obj.pkl",
    "/var/log/syslog",
    "/var/log/wtmp",
    "/var/log/btmp",
    "/var/log/apt/history.log",
    "/home/ubuntu/.ansible/tmp/ansible-local-1/x",  # the AMI build's ssh user runs the play
    "/home/ubuntu/.python_history",
]
# the script's own list before: tokens only under /root, no login keys, no cloud-init state, only *.log
# truncated


def left_after_cleanup(paths: list[str], keep: str = "") -> list[str]:
    """Each path seeded with content, cleanup.sh run with KTINFRA_KEEP=keep: "left: PATH" for each kept."""
    seed = " && ".join(f"mkdir -p {os.path.dirname(p)} && echo secret > {p}" for p in paths)
    report = "for f in " + " ".join(paths) + '; do [ -s "$f" ] && echo "left: $f"; done; true'
    proc = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "/bin/sh", "-e", f"KTINFRA_KEEP={keep}",
         "-v", f"{SCRIPT}:/cleanup.sh:ro", BASE,
         "-c", f"{seed} && sh /cleanup.sh >/dev/null && {report}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.fixture(scope="module", autouse=True)
def _base_image():
    if subprocess.run(["docker", "image", "inspect", BASE], capture_output=True).returncode != 0:
        pytest.fail(f"base image {BASE} missing: `make docker-ready` builds it")


def test_nothing_secret_or_host_specific_is_left():
    assert left_after_cleanup(LEFT) == []


def test_tokens_are_kept_when_asked():
    kept = left_after_cleanup(LEFT, "tokens")
    assert kept == [
        "left: /root/.cache/huggingface/token",
        "left: /home/lab/.cache/huggingface/token",
        "left: /home/lab/.netrc",
        "left: /home/lab/.git-credentials",
    ]
