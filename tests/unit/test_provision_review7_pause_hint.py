"""The refusal of an untimed pause told every user to "leave it out with --skip-tags", also where the pause
has no tag (no --skip-tags leaves out only it). It now names a tag the pause has (its own or one it inherits
from its block, role or play), or says to tag it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktinfra.provision import ProvisionError, ProvisionRequest


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("  tasks: [{name: Go, pause: {}}]\n", "or tag it to skip it with --skip-tags"),
        (
            "  tasks: [{name: Go, pause: {}, tags: [confirm, always]}]\n",
            "or leave it out with --skip-tags confirm",
        ),
        ("  tags: [reboot]\n  tasks: [{name: Go, pause: {}}]\n", "or leave it out with --skip-tags reboot"),
    ],
    ids=["untagged", "own-tag", "play-tag"],
)
def test_the_refusal_names_a_tag_that_skips_the_pause(tmp_path: Path, text: str, hint: str) -> None:
    (tmp_path / "hosts").write_text("localhost\n")
    (tmp_path / "play.yml").write_text(f"- hosts: all\n  gather_facts: false\n{text}")
    with pytest.raises(ProvisionError) as raised:
        ProvisionRequest(tmp_path / "play.yml", tmp_path / "hosts", artifacts=tmp_path / "runs").validate()
    assert str(raised.value).endswith(f"give it seconds or minutes, {hint}"), raised.value
