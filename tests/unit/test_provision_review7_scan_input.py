"""The playbook walk of `ktinfra provision`'s checks (untimed pause, task debugger, vars_prompt) on playbooks
Ansible itself refuses: a traceback or a wrong reason was given for them.

A `debugger:` or play `strategy:` holding a list or mapping was a TypeError (unhashable) out of validate(); a
pause whose arguments Ansible cannot split (an unbalanced quote) or that are no mapping was refused as one
that "waits for someone to press Enter". Both are now left to ansible-playbook, which names the problem.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktinfra.provision import ProvisionRequest


@pytest.mark.parametrize(
    "tasks",
    [
        "  tasks: [{debugger: [on_failed]}]\n",
        "  strategy: [debug]\n  debugger: {a: 1}\n  tasks: []\n",
        "  tasks: [{pause: 'prompt=\"unbalanced'}]\n",
        "  tasks: [{pause: 5}, {pause: [prompt]}]\n",
    ],
    ids=["task-debugger-list", "play-mappings", "pause-unbalanced-quote", "pause-not-a-mapping"],
)
def test_a_playbook_ansible_refuses_is_left_to_ansible(tmp_path: Path, tasks: str) -> None:
    (tmp_path / "hosts").write_text("localhost\n")
    (tmp_path / "play.yml").write_text(f"- hosts: all\n  gather_facts: false\n{tasks}")
    ProvisionRequest(tmp_path / "play.yml", tmp_path / "hosts", artifacts=tmp_path / "runs").validate()
