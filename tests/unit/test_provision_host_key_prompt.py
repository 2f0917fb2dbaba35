"""An SSH host key missing from known_hosts made `ktinfra provision` wait for ever.

Ansible's paramiko connection asks on ansible-playbook's terminal whether to trust an unknown host key
("paramiko: The authenticity of host ... Are you sure you want to continue connecting (yes/no)?"); under
ansible-runner that terminal is one nobody types into, so an unattended run hung there until killed. The run
now makes that question impossible, without turning checking off: the host fails with the key's fingerprint,
and the report says how to go on (add the key to known_hosts, or turn checking off yourself). A host key
checking the user turned off stays off. The connection plugin below is the local one behind paramiko_ssh's own
missing-host-key policy (paramiko itself is not needed); real runs of the CLI, killed after prompts.TIMEOUT
seconds (the old code hangs there). The ssh connection never could ask: Ansible runs ssh without a terminal
(it says "Host key verification failed"); that message gets the same advice.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import test_provision_review5_prompts as prompts

from ktinfra.provision import RunState

PLUGIN = '''
DOCUMENTATION = """
name: askingparamiko
short_description: the local connection, after paramiko_ssh's missing-host-key policy
description: [Calls paramiko_ssh's own MyAddPolicy for an unknown key before it connects.]
author: ktinfra tests
extends_documentation_fragment: [connection_pipelining]
options:
  host_key_checking: {type: boolean, default: true, env: [{name: ANSIBLE_HOST_KEY_CHECKING}]}
  host_key_auto_add: {type: boolean, env: [{name: ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD}]}
  use_persistent_connections:
    type: boolean
    default: false
    env: [{name: ANSIBLE_USE_PERSISTENT_CONNECTIONS}]
"""
from ansible.plugins.connection.local import Connection as Local
from ansible.plugins.connection.paramiko_ssh import MyAddPolicy


class Key:
    def get_fingerprint(self):
        return b"\\x12\\x34"

    def get_name(self):
        return "ssh-ed25519"


class HostKeys:
    def add(self, *args):
        pass


class Client:
    _host_keys = HostKeys()


class Connection(Local):
    transport = "askingparamiko"

    def _connect(self):
        MyAddPolicy(self).missing_host_key(Client(), "gpu1.example", Key())
        return super()._connect()
'''


@pytest.fixture
def site(tmp_path: Path) -> Path:
    prompts.make_site(
        tmp_path, "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n"
    )
    (tmp_path / "connection_plugins").mkdir()
    (tmp_path / "connection_plugins" / "askingparamiko.py").write_text(PLUGIN)
    python = shutil.which("python3")
    (tmp_path / "hosts").write_text(
        f"gpu1 ansible_connection=askingparamiko ansible_python_interpreter={python}\n"
    )
    return tmp_path


def test_an_unknown_host_key_fails_the_host_instead_of_waiting(site: Path) -> None:
    result = prompts.provision(site, prompts.clean_env(), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["failed_hosts"] == ["gpu1"] and report["status"] == "failed", report
    assert "The authenticity of host 'gpu1.example' can't be established" in report["failures"][0]["message"]
    assert len(report["errors"]) == 1 and report["errors"][0].startswith("gpu1: the SSH host key is not in")
    assert "error: gpu1: the SSH host key is not in known_hosts" in result.stderr
    assert "~/.ssh/known_hosts" in result.stderr and "host_key_checking = False" in result.stderr


@pytest.mark.parametrize("variable", ["ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD"])
def test_checking_the_user_turned_off_stays_off(site: Path, variable: str) -> None:
    env = prompts.clean_env()
    env[variable] = "False" if variable == "ANSIBLE_HOST_KEY_CHECKING" else "True"
    result = prompts.provision(site, env, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["hosts"]["gpu1"]["ok"] == 1


def _failed(host: str, message: str) -> RunState:
    state = RunState()
    event = {"host": host, "task": "ping", "res": {"msg": message}}
    state.handle({"event": "runner_on_unreachable", "event_data": event})
    return state


def test_ssh_host_key_failures_get_the_same_advice() -> None:
    from ktinfra.provision import host_key_problems  # new: the tests above run on the old code too

    ssh = _failed("box", "Failed to connect to the host via ssh: Host key verification failed.")
    assert host_key_problems(ssh)[0].startswith(
        "box: the SSH host key is not in known_hosts (or has changed)"
    )
    assert (
        host_key_problems(_failed("box", "Failed to connect to the host via ssh: Connection refused")) == []
    )
