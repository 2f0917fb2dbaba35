"""kt_common's os_packages (kt_preflight, kt_python_env, kt_model_store and kt_serve install their OS packages
through it) against real apt in Debian 12 containers (ktinfra/debian12-systemd: mmdebstrap removed its apt
lists, as cloud images and container images ship). `make render-systemd` runs it.

Before, the roles used `package` without refreshing the lists: on such a host every missing package failed
with "No package matching"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def container(*docker_args: str):
    name = f"ospkg-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["docker", "run", "-d", "--name", name, *docker_args, IMAGE, "sleep", "infinity"],
        check=True,
        capture_output=True,
    )
    return name


@pytest.fixture
def offline():
    name = container("--network", "none")
    yield name
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)


@pytest.fixture
def online():
    name = container()
    yield name
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def install(tmp_path: Path, host: str, packages: list[str], *flags: str) -> tuple[int, str]:
    play = [
        {
            "hosts": "all",
            "gather_facts": False,
            "tasks": [
                {
                    "ansible.builtin.include_role": {"name": "kt_common", "tasks_from": "os_packages"},
                    "vars": {"kt_common_os_packages": packages, "kt_common_os_packages_why": "for the test"},
                }
            ],
        }
    ]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    connection = "ansible_connection=community.docker.docker ansible_python_interpreter=/usr/bin/python3"
    inventory = f"{host} {connection}\n"
    (tmp_path / "hosts").write_text(inventory)
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"))
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    proc = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "hosts"), str(tmp_path / "play.yml"), *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    return proc.returncode, proc.stdout + proc.stderr


def apt_lists(host: str) -> list[str]:
    out = subprocess.run(
        ["docker", "exec", host, "sh", "-c", "ls /var/lib/apt/lists | grep _Packages || true"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_installed_packages_need_no_mirror(tmp_path, offline):
    """An offline host with a baked image: every package is there, so apt is not asked to refresh."""
    assert apt_lists(offline) == []
    rc, output = install(tmp_path, offline, ["numactl", "git", "python3-venv"])
    assert rc == 0, output[-3000:]
    assert "changed=0" in output and "failed=0" in output
    assert apt_lists(offline) == []


def test_a_missing_package_is_installed_after_the_lists_are_refreshed(tmp_path, online):
    assert apt_lists(online) == []
    rc, output = install(tmp_path, online, ["numactl", "jq"], "--check")
    assert rc == 0 and "changed=1" in output, output[-3000:]  # --check: no lists, no failure
    assert "a real run refreshes the apt lists and installs jq" in output
    assert apt_lists(online) == []
    rc, output = install(tmp_path, online, ["numactl", "jq"])
    assert rc == 0, output[-3000:]
    assert apt_lists(online), "the apt lists were not refreshed"
    subprocess.run(["docker", "exec", online, "jq", "--version"], check=True, capture_output=True)
    rc, output = install(tmp_path, online, ["numactl", "jq"])
    assert rc == 0 and "changed=0" in output, output[-3000:]


def test_an_unknown_package_is_named(tmp_path, online):
    rc, output = install(tmp_path, online, ["no-such-package-ktinfra"])
    assert rc != 0
    assert "no-such-package-ktinfra" in output, output[-3000:]
