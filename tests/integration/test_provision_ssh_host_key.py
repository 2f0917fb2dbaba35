"""`ktinfra provision` over ssh to a host whose key is not in known_hosts: a real sshd in a Debian 12
container.

Under ansible-runner a host key question would wait on a terminal nobody types into. Ansible runs ssh without
a terminal, so ssh cannot ask: the host fails at once ("Host key verification failed") and the report says
how to go on (check the key, add it to known_hosts, or turn checking off yourself). Once the key is in
known_hosts the same run connects. ssh reads the test's own known_hosts (ssh takes ~ from the passwd entry,
not from HOME: UserKnownHostsFile says which), none of this box's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")
PLAY = "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n"
SSHD = (
    "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server python3"
    " >/dev/null && mkdir -p /run/sshd /root/.ssh && cat > /root/.ssh/authorized_keys && /usr/sbin/sshd"
)


@pytest.fixture
def sshd(tmp_path: Path) -> tuple[str, Path]:
    """The container's address and the key that logs in as its root."""
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.fail("needs the OpenSSH client (ssh, ssh-keygen, ssh-keyscan)")
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    name = f"sshkey-{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "run", "-d", "--name", name, IMAGE, "sleep", "infinity"], check=True,
                   capture_output=True)  # fmt: skip
    try:
        public = key.with_suffix(".pub").read_text()
        subprocess.run(["docker", "exec", "-i", name, "sh", "-c", SSHD], input=public, check=True,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
        inspect = [
            "docker",
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            name,
        ]
        yield subprocess.run(inspect, check=True, capture_output=True, text=True).stdout.strip(), key
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def _provision(site: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "SSH_"))}
    env.update(HOME=str(site), PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "ktinfra", "provision", "play.yml", "-i", "hosts", "--artifacts", "runs",
               "--json"]  # fmt: skip
    return subprocess.run(command, cwd=site, env=env, capture_output=True, text=True, timeout=120)


def test_an_unknown_host_key_fails_fast_and_says_how_to_go_on(tmp_path: Path, sshd: tuple[str, Path]) -> None:
    address, key = sshd
    known = tmp_path / "known_hosts"
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts").write_text(
        f"box ansible_host={address} ansible_user=root ansible_ssh_private_key_file={key} "
        "ansible_connection=ssh ansible_python_interpreter=/usr/bin/python3 "
        f"ansible_ssh_common_args='-o UserKnownHostsFile={known} -o GlobalKnownHostsFile=/dev/null'\n"
    )
    result = _provision(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["failures"][0]["kind"] == "unreachable", report
    assert "Host key verification failed" in report["failures"][0]["message"], report
    assert "error: box: the SSH host key is not in known_hosts" in result.stderr
    scanned = subprocess.run(["ssh-keyscan", address], check=True, capture_output=True, text=True).stdout
    known.write_text(scanned)
    again = _provision(tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["hosts"]["box"]["ok"] == 1
