"""`ktinfra provision` keeps Ansible's SSH host key checking.

ansible-runner sets ANSIBLE_HOST_KEY_CHECKING=False wherever the environment does not set it, and an
environment variable beats ansible.cfg: ktinfra provision connected to every host with
`-o StrictHostKeyChecking=no` (an unknown or changed host key was accepted) where ansible-playbook, run
by hand with the same ansible.cfg, refuses. The cases below read the ssh command Ansible really ran
(ANSIBLE_VERBOSITY=3 prints it) against a closed port on 127.0.0.1, and the ssh plugin's own option.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app

PLAY = (
    "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: Reach the host\n      ansible.builtin.ping:\n"
)
LOOKUP = (
    "- hosts: all\n  gather_facts: false\n  tasks:\n"
    "    - name: Show the ssh plugin's host_key_checking\n      ansible.builtin.debug:\n"
    "        msg: \"hkc={{ lookup('ansible.builtin.config', 'host_key_checking', plugin_type='connection',"
    " plugin_name='ssh') }}\"\n"
)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_SSH_HOST_KEY_CHECKING", "ANSIBLE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ansible.cfg, no ~/.ssh of this box
    monkeypatch.chdir(tmp_path)  # ansible-playbook runs here: only this folder's ansible.cfg applies
    return tmp_path


def _provision(site: Path, play: str, hosts: str) -> tuple[int, dict, str]:
    (site / "pb.yml").write_text(play)
    (site / "hosts").write_text(hosts)
    args = ["provision", str(site / "pb.yml"), "-i", str(site / "hosts"), "--json",
            "--artifacts", str(site / "runs")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    report = json.loads(result.stdout)
    stdout = (Path(report["artifacts"]) / "stdout").read_text()
    return result.exit_code, report, stdout


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")
@pytest.mark.parametrize(
    ("cfg", "env", "strict_off"),
    [
        (None, None, False),  # Ansible's default: checked (before: StrictHostKeyChecking=no)
        ("[defaults]\nhost_key_checking = True\n", None, False),  # said in ansible.cfg (before: ignored)
        ("[ssh_connection]\nhost_key_checking = True\n", None, False),
        ("[defaults]\nhost_key_checking = False\n", None, True),  # turned off by the user: still off
        (None, "False", True),
    ],
    ids=["default", "cfg-defaults-on", "cfg-ssh-on", "cfg-off", "env-off"],
)
def test_the_ssh_command_checks_host_keys_as_configured(
    site: Path, monkeypatch: pytest.MonkeyPatch, cfg: str | None, env: str | None, strict_off: bool
) -> None:
    if cfg:
        (site / "ansible.cfg").write_text(cfg)
    if env:
        monkeypatch.setenv("ANSIBLE_HOST_KEY_CHECKING", env)
    monkeypatch.setenv("ANSIBLE_VERBOSITY", "3")  # ansible-playbook -vvv: prints each ssh command it runs
    hosts = f"gpu1 ansible_host=127.0.0.1 ansible_port={_closed_port()} ansible_connection=ssh\n"
    code, report, stdout = _provision(site, PLAY, hosts)
    assert code == 1 and report["failed_hosts"] == ["gpu1"], report  # nothing listens there
    assert report["failures"][0]["kind"] == "unreachable", report
    commands = [line for line in stdout.splitlines() if "SSH: EXEC ssh" in line]
    assert commands, stdout[-3000:]
    assert all(("StrictHostKeyChecking=no" in line) is strict_off for line in commands), commands


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [(None, "True"), ("[defaults]\nhost_key_checking = False\n", "False")],
    ids=["default", "cfg-off"],
)
def test_the_ssh_plugin_option_is_ansibles_own(site: Path, cfg: str | None, expected: str) -> None:
    if cfg:
        (site / "ansible.cfg").write_text(cfg)
    hosts = f"localhost ansible_connection=local ansible_python_interpreter={shutil.which('python3')}\n"
    code, report, stdout = _provision(site, LOOKUP, hosts)
    assert code == 0, report
    assert f"hkc={expected}" in stdout, stdout[-2000:]
