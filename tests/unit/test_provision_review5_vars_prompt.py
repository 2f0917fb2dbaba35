"""`ktinfra provision` of a playbook with vars_prompt, the variable not given with -e.

ansible-playbook prompts for it on ansible-runner's terminal, which nobody types into: the run hung at the
prompt with no end. ansible-runner's event for the prompt (playbook_on_vars_prompt) now stops the run as a
Ctrl-C would, and the report names the variable and how to give it. A real run of the CLI in a subprocess,
killed after TIMEOUT seconds (on the old code it is still waiting then).
"""

from __future__ import annotations

import json
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
  vars_prompt:
    - name: api_key
      prompt: API key
  tasks:
    - name: Show it
      ansible.builtin.debug: {msg: "key={{ api_key }}"}
"""


def provision(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PYTHONPATH"] = str(REPO)  # this checkout's ktinfra, not the one the venv has installed
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
        pytest.fail(f"ktinfra provision still ran after {TIMEOUT} s (waiting at the vars_prompt)")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    (tmp_path / "play.yml").write_text(PLAY)
    python = shutil.which("python3")
    local = f"localhost ansible_connection=local ansible_python_interpreter={python}\n"
    (tmp_path / "hosts").write_text(local)
    return tmp_path


def test_a_vars_prompt_stops_the_run_naming_the_variable(site: Path) -> None:
    result = provision(site, "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    message = "play.yml prompts for api_key (vars_prompt), which ktinfra provision cannot answer: give it"
    assert report["ok"] is False and report["status"] == "failed"
    assert report["errors"] == [f"{message} with -e api_key=VALUE"]
    assert result.stderr == f"error: {message} with -e api_key=VALUE\n"
    assert report["hosts"] == {}  # stopped before its first task


def test_a_vars_prompt_given_with_extra_vars_runs(site: Path) -> None:
    result = provision(site, "--json", "-e", "api_key=abc")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ok"] is True
