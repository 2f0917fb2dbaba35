"""`ktinfra provision --tags` with a tag nothing in the playbook has.

ansible-playbook takes a mistyped tag (`--tags sevre`) as asked: it selects no task, the run changes nothing
and exits 0 — ktinfra reported a successful run. A mistyped `--skip-tags` skips nothing: everything runs,
the part meant to be left out too. Such a tag is now refused before the run, with the playbook's tags. The
tags are read as Ansible gives them: plays, roles (and their meta dependencies), blocks (rescue too), tasks
under a `when`, imports and includes (an include's `apply`; a templated file name: every file it may name);
where part of the playbook cannot be read from here (a templated tag, a collection's role) nothing is
refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.provision import ProvisionError, ProvisionRequest

PLAY = """
- hosts: all
  gather_facts: false
  tags: [play_tag]
  roles:
    - role: web
      tags: [role_entry_tag]
  tasks:
    - name: Under a when
      ansible.builtin.debug: {msg: hi}
      when: false
      tags: [when_tag]
    - name: A block
      tags: block_tag
      block:
        - ansible.builtin.debug: {msg: hi}
      rescue:
        - ansible.builtin.debug: {msg: rescued}
          tags: [rescue_tag]
    - name: Include with apply
      ansible.builtin.include_tasks:
        file: extra.yml
        apply: {tags: [apply_tag]}
    - name: Include of a templated name
      ansible.builtin.include_tasks: "{{ flavour }}.yml"
    - ansible.builtin.debug: {msg: never}
      tags: [never, only_by_hand]
- import_playbook: more.yml
  tags: [import_tag]
"""
FILES = {
    "more.yml": "- hosts: all\n  gather_facts: false\n  tasks:\n"
    "    - {ansible.builtin.debug: {msg: x}, tags: [imported_task_tag]}\n",
    "extra.yml": "- {ansible.builtin.debug: {msg: x}, tags: [included_tag]}\n",
    "one_flavour.yml": "- {ansible.builtin.debug: {msg: x}, tags: [flavour_tag]}\n",
    "roles/web/tasks/main.yml": "- {ansible.builtin.debug: {msg: x}, tags: [role_task_tag]}\n",
    "roles/web/meta/main.yml": "dependencies:\n  - {role: base, tags: [dependency_tag]}\n",
    "roles/base/tasks/main.yml": "- {ansible.builtin.debug: {msg: x}, tags: [base_task_tag]}\n",
}
KNOWN = (
    "play_tag role_entry_tag when_tag block_tag rescue_tag apply_tag never only_by_hand import_tag "
    "imported_task_tag included_tag flavour_tag role_task_tag dependency_tag base_task_tag"
).split()


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no ansible.cfg of the checkout
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("ANSIBLE_ROLES_PATH", raising=False)
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    (tmp_path / "play.yml").write_text(PLAY)
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "hosts").write_text("localhost ansible_connection=local\n")
    return tmp_path


def _request(site: Path, tags: str | None = None, skip_tags: str | None = None) -> ProvisionRequest:
    return ProvisionRequest(site / "play.yml", site / "hosts", tags=tags, skip_tags=skip_tags,
                            artifacts=site / "runs")  # fmt: skip


def test_a_mistyped_tag_is_refused_before_the_run(site: Path) -> None:
    args = ["provision", "play.yml", "-i", "hosts", "--artifacts", "runs", "--tags", "play_tag,sevre"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    message = result.stderr.strip()
    assert message.startswith("error: --tags sevre: no play, role, block or task of play.yml has this tag")
    assert all(tag in message for tag in KNOWN), message
    assert not (site / "runs").exists()  # nothing ran


def test_a_mistyped_skip_tag_is_refused(site: Path) -> None:
    with pytest.raises(
        ProvisionError, match=r"^--skip-tags rol_task_tag,nope: .* these tags, so Ansible would skip"
    ):
        _request(site, skip_tags="rol_task_tag,nope,block_tag").validate()


@pytest.mark.parametrize("tag", [*KNOWN, "all", "always", "tagged", "untagged"])
def test_every_tag_the_playbook_has_is_taken(site: Path, tag: str) -> None:
    _request(site, tags=tag, skip_tags=tag).validate()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("extra.yml", "- {ansible.builtin.debug: {msg: x}, tags: '{{ some_tags }}'}\n"),
        ("roles/base/meta/main.yml", "dependencies: [my_ns.my_coll.other]\n"),
        ("extra.yml", "- ansible.builtin.include_role: {name: '{{ role_name }}'}\n"),
    ],
    ids=["templated-tag", "collection-role", "templated-role"],
)
def test_nothing_is_refused_where_the_playbook_cannot_be_read_whole(site: Path, name: str, text: str) -> None:
    (site / name).parent.mkdir(parents=True, exist_ok=True)
    (site / name).write_text(text)
    _request(site, tags="made_up").validate()
