"""`ktinfra provision` where Ansible's configuration makes ansible-playbook ask for a password.

ask_vault_pass, ask_pass, become_ask_pass (ansible.cfg or ANSIBLE_* variables) and a vault_identity_list entry
LABEL@prompt make ansible-playbook prompt before its first play. ansible-runner gives it a terminal nobody
types into: the run hung at "Vault password:" with no event, no output and no end. Such a setting is now
refused, named with where it is set, before ansible-playbook starts. Real runs of the CLI in a subprocess
(killed after TIMEOUT seconds: on the old code each case hangs there).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 60
REPO = Path(__file__).resolve().parents[2]
PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Say something
      ansible.builtin.debug: {msg: hi}
"""


def provision(site: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ktinfra", "provision", "play.yml", "-i", "hosts", "--artifacts", "runs"]
    process = subprocess.Popen(
        [*command, *args], cwd=site, env=env, text=True, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"ktinfra provision still ran after {TIMEOUT} s (waiting at a prompt)")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def make_site(folder: Path, play: str) -> Path:
    """`play` as play.yml, and an inventory of this host over the local connection."""
    (folder / "play.yml").write_text(play)
    python = shutil.which("python3")
    local = f"localhost ansible_connection=local ansible_python_interpreter={python}\n"
    (folder / "hosts").write_text(local)
    return folder


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    return make_site(tmp_path, PLAY)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PYTHONPATH"] = str(REPO)  # this checkout's ktinfra, not the one the venv has installed
    return env


@pytest.mark.parametrize(
    ("cfg", "variable", "named"),
    [
        ("[defaults]\nask_vault_pass = True\n", None, "ask_vault_pass is set"),
        (None, ("ANSIBLE_BECOME_ASK_PASS", "true"), "become_ask_pass is set (env: ANSIBLE_BECOME_ASK_PASS)"),
        ("[defaults]\nask_pass = True\n", None, "ask_pass is set"),
        ("[defaults]\nvault_identity_list = dev@prompt\n", None, "vault_identity_list holds dev@prompt"),
    ],
    ids=["ask_vault_pass", "become_ask_pass-env", "ask_pass", "vault-id-prompt"],
)
def test_a_configured_password_prompt_is_refused_before_ansible_runs(site, cfg, variable, named) -> None:
    env = clean_env()
    if cfg:
        (site / "ansible.cfg").write_text(cfg)
    if variable:
        env[variable[0]] = variable[1]
    result = provision(site, env, "--json")
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert named in result.stderr and "cannot answer" in result.stderr, result.stderr
    assert not (site / "runs").exists()  # nothing ran


def test_a_vault_password_file_still_runs(site: Path) -> None:
    (site / "pass").write_text("secret\n")
    (site / "ansible.cfg").write_text("[defaults]\nvault_identity_list = dev@pass\n")
    result = provision(site, clean_env(), "--json")
    assert result.returncode == 0, result.stderr
    assert '"ok": true' in result.stdout
