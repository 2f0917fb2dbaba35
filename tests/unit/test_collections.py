"""The collections the roles and playbooks use besides ansible-core are declared in
collections/requirements.yml, and a controller without them is refused before the first task runs.

Before: kt_host_tuning's ansible.posix.mount (tasks/persist.yml) was declared nowhere. On an ansible-core-only
controller, provision.yml ran preflight (the tool venv) and the envs play (the Python envs) and only then
failed, loading persist.yml, with "couldn't resolve module/action 'ansible.posix.mount'".
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO / "collections" / "requirements.yml"
FQCN = re.compile(r"^([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+$")
IN_TEXT = [
    re.compile(r"(?:lookup|query)\(\s*['\"]([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+"),  # lookup plugins
    re.compile(r"\|\s*([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+\s*[(}|]"),  # filters
    re.compile(r"CALLBACKS?(?:_ENABLED)?\s*[=:]\s*['\"]?([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+"),  # callbacks
]
CORE = {"ansible.builtin", "ansible.legacy"}


def _keys(node) -> set[str]:
    if isinstance(node, dict):
        found = {m.group(1) for key in node if isinstance(key, str) and (m := FQCN.match(key))}
        return found.union(*(_keys(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_keys(item) for item in node))
    return set()


def used_collections() -> dict[str, set[str]]:
    """{collection: {files using it}} over the roles, playbooks, molecule scenarios and the image template."""
    files = [*REPO.glob("roles/**/*.yml"), *REPO.glob("playbooks/*.yml"), *REPO.glob("molecule/**/*.yml")]
    files += [*REPO.glob("images/*.hcl"), *REPO.glob("molecule/**/*.sh")]
    used: dict[str, set[str]] = {}
    for path in files:
        text = path.read_text()
        found = {m.group(1) for pattern in IN_TEXT for m in pattern.finditer(text)}
        if path.suffix == ".yml":
            found |= _keys(yaml.safe_load(text))
        for collection in found - CORE:
            used.setdefault(collection, set()).add(str(path.relative_to(REPO)))
    return used


def test_every_collection_used_is_declared():
    declared = {entry["name"] for entry in yaml.safe_load(REQUIREMENTS.read_text())["collections"]}
    used = used_collections()
    assert "roles/kt_host_tuning/tasks/persist.yml" in used.get("ansible.posix", set())  # the scan sees it
    assert {name: files for name, files in used.items() if name not in declared} == {}
    assert declared <= set(used)  # nothing declared that nothing uses


def _syntax_check(tmp: Path, playbook: str, with_collections: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"))
    if not with_collections:  # an ansible-core-only controller: no collection beside ansible.builtin
        env |= {"ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false", "ANSIBLE_COLLECTIONS_PATH": str(tmp)}
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "--syntax-check", "-i", "localhost,"]
    return subprocess.run(
        [*command, str(REPO / "playbooks" / playbook)], capture_output=True, text=True, env=env, cwd=REPO
    )


@pytest.mark.parametrize("playbook", ["provision.yml", "site.yml", "image.yml"])
def test_a_controller_without_ansible_posix_is_refused_when_the_playbook_is_parsed(tmp_path, playbook):
    """kt_host_tuning imports persist.yml statically: the playbook is refused while it is parsed, before the
    first task of any play (a parse error, as --syntax-check shows), naming the module and the missing
    collection; persist.yml's comment above the task names the requirements file."""
    proc = _syntax_check(tmp_path, playbook, with_collections=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "couldn't resolve module/action 'ansible.posix.mount'" in output, output
    assert "missing collection" in output and "collections/requirements.yml" in output, output
    proc = _syntax_check(tmp_path, playbook, with_collections=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
