"""`ktinfra provision` of a playbook with vars_prompt, the variable not given with -e.

ansible-playbook prompts for it on ansible-runner's terminal, which nobody types into: the run hung at the
prompt with no end. ansible-runner's event for the prompt (playbook_on_vars_prompt) now stops the run as a
Ctrl-C would, and the report names the variable and how to give it. A real run of the CLI in a subprocess,
killed after prompts.TIMEOUT seconds (on the old code it is still waiting then).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import test_provision_review5_prompts as prompts

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
    return prompts.provision(site, prompts.clean_env(), *args)


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    return prompts.make_site(tmp_path, PLAY)


def test_a_vars_prompt_is_refused_naming_the_variable(site: Path) -> None:
    """Refused before the run since test_provision_review7_vars_prompt (a later play's prompt came after the
    first play had run); a name Jinja makes still stops the run at its prompt (tested there)."""
    result = provision(site, "--json")
    assert result.returncode == 1, result.stderr
    message = "play.yml prompts for api_key (vars_prompt), which ktinfra provision cannot answer: give it"
    assert result.stdout == ""
    assert result.stderr == f"error: {message} with -e api_key=VALUE\n"
    assert not (site / "runs").exists()


def test_a_vars_prompt_given_with_extra_vars_runs(site: Path) -> None:
    result = provision(site, "--json", "-e", "api_key=abc")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ok"] is True
