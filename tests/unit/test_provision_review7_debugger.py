"""`ktinfra provision` where the task debugger would open at a failed task.

ANSIBLE_ENABLE_TASK_DEBUGGER / enable_task_debugger, the debug strategy and a `debugger:` keyword (always,
on_failed, ...) on a play, block or task open an interactive debugger prompt: under ansible-runner nobody
types into it, and the first failed task hung the run for ever (no event, no end). Each is refused before
ansible-playbook starts, named with where it is set. A real run of the CLI is killed after prompts.TIMEOUT
seconds (on the old code it is still waiting then).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import test_provision_review5_prompts as prompts

from ktinfra.provision import ProvisionError, ProvisionRequest

FAILING = "    - name: Fails\n      ansible.builtin.command: /bin/false\n"


def play(tasks: str, extra: str = "") -> str:
    return f"- hosts: all\n  gather_facts: false\n{extra}  tasks:\n{tasks}"


def test_an_enabled_task_debugger_is_refused_before_ansible_runs(tmp_path: Path) -> None:
    site = prompts.make_site(tmp_path, play(FAILING))
    env = prompts.clean_env()
    env["ANSIBLE_ENABLE_TASK_DEBUGGER"] = "True"
    result = prompts.provision(site, env, "--json")
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith(
        "error: enable_task_debugger is set (env: ANSIBLE_ENABLE_TASK_DEBUGGER): ansible-playbook would "
        "wait at a prompt ktinfra provision cannot answer"
    ), result.stderr
    assert not (site / "runs").exists()  # nothing ran


def test_the_debug_strategy_in_ansible_cfg_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [name for name in os.environ if name.startswith("ANSIBLE_")]:
        monkeypatch.delenv(name)
    (tmp_path / "ansible.cfg").write_text("[defaults]\nstrategy = debug\n")
    (tmp_path / "hosts").write_text("localhost\n")
    (tmp_path / "play.yml").write_text(play(FAILING))
    with pytest.raises(
        ProvisionError, match=r"^strategy is debug \(.*ansible.cfg\): ansible-playbook would wait"
    ):
        ProvisionRequest(tmp_path / "play.yml", tmp_path / "hosts", artifacts=tmp_path / "runs").validate()


BLOCK = "    - block:\n        - {name: Fails, ansible.builtin.command: /bin/false}\n      debugger: always\n"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (play(FAILING, "  debugger: on_failed\n"), "play 'all' in play.yml sets debugger: on_failed"),
        (play(BLOCK), "a block in play.yml sets debugger: always"),
        (
            play(f"{FAILING}      debugger: on_unreachable\n"),
            "task 'Fails' in play.yml sets debugger: on_unreachable",
        ),
        (
            play(FAILING, "  strategy: ansible.builtin.debug\n"),
            "play 'all' in play.yml sets strategy: ansible.builtin.debug",
        ),
    ],
    ids=["play", "block", "task", "play-strategy"],
)
def test_a_debugger_keyword_is_refused_naming_where(
    tmp_path: Path, monkeypatch, text: str, named: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts").write_text("localhost\n")
    (tmp_path / "play.yml").write_text(text.replace("- hosts: all\n", "- hosts: all\n  name: all\n"))
    with pytest.raises(ProvisionError) as raised:
        ProvisionRequest(tmp_path / "play.yml", tmp_path / "hosts", artifacts=tmp_path / "runs").validate()
    assert str(raised.value).startswith(f"{named}: the task debugger would wait at its prompt"), raised.value


def test_debugger_never_runs(tmp_path: Path) -> None:
    (tmp_path / "hosts").write_text("localhost\n")
    (tmp_path / "play.yml").write_text(play(FAILING + "      debugger: never\n"))
    ProvisionRequest(tmp_path / "play.yml", tmp_path / "hosts", artifacts=tmp_path / "runs").validate()
