"""A task file or role used twice, first where --tags/--skip-tags leave it out: the untimed-pause check read
each file once, so the second use, which runs, went unchecked and the run changed the host before it stopped
at the pause. Each file is now read once per set of tags it inherits."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktinfra.provision import ProvisionError, ProvisionRequest

PLAYS = """- hosts: all
  gather_facts: false
  {first}
- hosts: all
  gather_facts: false
  {second}
"""


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("tasks: [{import_tasks: gate.yml, tags: [optional]}]", "tasks: [{import_tasks: gate.yml}]"),
        ("roles: [{role: gate, tags: [optional]}]", "roles: [gate]"),
    ],
    ids=["task-file", "role"],
)
def test_the_use_that_runs_is_checked(tmp_path: Path, first: str, second: str) -> None:
    (tmp_path / "hosts").write_text("localhost\n")
    (tmp_path / "gate.yml").write_text("- {name: Go, pause: {}}\n")
    (tmp_path / "roles" / "gate" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "gate" / "tasks" / "main.yml").write_text("- {name: Go, pause: {}}\n")
    (tmp_path / "play.yml").write_text(PLAYS.format(first=first, second=second))
    request = ProvisionRequest(tmp_path / "play.yml", tmp_path / "hosts", artifacts=tmp_path / "runs")
    request.skip_tags = "optional"
    with pytest.raises(ProvisionError, match=r"^task 'Go' \(pause\) in .*waits for someone to press Enter"):
        request.validate()
