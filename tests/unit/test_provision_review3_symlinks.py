"""A symlinked inventory file or playbook: Ansible reads group_vars/ beside the path as given.

ansible-playbook takes an inventory source without following symlinks (unfrackpath(follow=False)) and the
playbook's directory as os.path.abspath gives it, and reads group_vars/ (and host_vars/) beside those. ktinfra
provision passed both through Path.resolve(): with `inventories/prod/hosts` a link to a shared hosts file, or
`site.yml` a link into playbooks/, the group_vars beside the link were silently not read (a variable
undefined, or worse its role default used). Real ansible-runner runs against localhost, tmp paths only.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from ktinfra.cli import app

PLAY = (
    "- hosts: all\n  gather_facts: false\n  tasks:\n"
    '    - name: Show the marker\n      ansible.builtin.debug:\n        msg: "marker={{ marker }}"\n'
)
LOCAL = f"localhost ansible_connection=local ansible_python_interpreter={shutil.which('python3')}\n"


def _provision(tmp_path: Path, playbook: Path, inventory: Path) -> tuple[int, dict, str]:
    args = ["provision", str(playbook), "-i", str(inventory), "--json", "--artifacts", str(tmp_path / "runs")]
    result = CliRunner().invoke(app, args)
    report = json.loads(result.stdout)
    return result.exit_code, report, (Path(report["artifacts"]) / "stdout").read_text()


def test_group_vars_beside_a_symlinked_inventory_file(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "hosts").write_text(LOCAL)
    site = tmp_path / "inventories" / "prod"
    (site / "group_vars").mkdir(parents=True)
    (site / "group_vars" / "all.yml").write_text("marker: from-prod\n")
    (site / "hosts").symlink_to(tmp_path / "shared" / "hosts")
    (tmp_path / "pb.yml").write_text(PLAY)
    code, report, stdout = _provision(tmp_path, tmp_path / "pb.yml", site / "hosts")
    assert code == 0 and report["failures"] == [], report  # before: 'marker' is undefined
    assert "marker=from-prod" in stdout
    assert report["inventory"] == str(site / "hosts")


def test_group_vars_beside_a_symlinked_playbook(tmp_path: Path) -> None:
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "site.yml").write_text(PLAY)
    (tmp_path / "site.yml").symlink_to(tmp_path / "playbooks" / "site.yml")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("marker: beside-the-link\n")
    (tmp_path / "inventory").mkdir()  # not beside group_vars/: only the playbook's folder has it
    (tmp_path / "inventory" / "hosts").write_text(LOCAL)
    code, report, stdout = _provision(tmp_path, tmp_path / "site.yml", tmp_path / "inventory" / "hosts")
    assert code == 0 and report["failures"] == [], report  # before: 'marker' is undefined
    assert "marker=beside-the-link" in stdout


def test_a_relative_inventory_through_a_symlinked_folder(tmp_path: Path, monkeypatch) -> None:
    """`-i current/hosts` with current -> prod: the group_vars of the folder the link points at, as before."""
    prod = tmp_path / "prod"
    (prod / "group_vars").mkdir(parents=True)
    (prod / "group_vars" / "all.yml").write_text("marker: prod-folder\n")
    (prod / "hosts").write_text(LOCAL)
    (tmp_path / "current").symlink_to(prod)
    (tmp_path / "pb.yml").write_text(PLAY)
    monkeypatch.chdir(tmp_path)
    code, report, stdout = _provision(tmp_path, Path("pb.yml"), Path("current/hosts"))
    assert code == 0 and "marker=prod-folder" in stdout, report
