"""kt_common's tasks/settings_file.yml, the one copy of "write the 0600 file a download sources for its proxy,
CA and index settings": no role writes one by hand (the proxy-secret tests of kt_preflight and kt_python_env
run it for real)."""

from __future__ import annotations

import yaml
from role_play import ROLES
from test_kt_common_venv import _role_files, _tasks

CALLERS = {"kt_preflight/tasks/tool.yml", "kt_python_env/tasks/pip_file.yml"}
INPUTS = {"kt_common_settings_file_content", "kt_common_settings_file_dir"}


def test_no_role_outside_kt_common_writes_the_settings_file_by_hand():
    """Before: kt_preflight's tool.yml held a copy of kt_python_env's pip_file.yml (tempfile, no_log copy)."""
    by_hand, callers = [], set()
    for rel, path in _role_files():
        if path.suffix != ".yml" or rel.parts[1] != "tasks":
            continue
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            include = task.get("ansible.builtin.include_role", {})
            if include.get("name") == "kt_common" and include.get("tasks_from") == "settings_file":
                callers.add(str(rel))
                assert INPUTS <= set(task["vars"]), rel
            written = task.get("ansible.builtin.copy", {}).get("content", "")
            if "tempfile" in str(task) and "ktinfra-pip" in str(task) or "ktinfra_pip_script" in str(written):
                by_hand.append(f"{rel}: {task.get('name')}")
    assert by_hand == []
    assert callers == CALLERS
    assert "no_log: true" in (ROLES / "kt_common" / "tasks" / "settings_file.yml").read_text()
