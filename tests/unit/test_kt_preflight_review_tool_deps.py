"""kt_preflight's ktinfra install (tasks/tool.yml) on localhost: a new ktinfra wheel goes into a tool venv
whose dependencies are all there without asking the index for them again."""

from __future__ import annotations

import sys
from pathlib import Path

from role_play import run_play

TOOL = [{"ansible.builtin.include_role": {"name": "kt_preflight", "tasks_from": "tool"}}]
DEAD_INDEX = {"kt_preflight_pip_index_url": "http://127.0.0.1:9/simple", "kt_preflight_pip_timeout": 3}
NO_LOCAL_WHEELS = {"PIP_CONFIG_FILE": "/dev/null"}


def _tool_vars(tmp_path: Path) -> dict:
    (tmp_path / "wheelhouse").mkdir()
    return {
        "kt_preflight_tool_dir": str(tmp_path / "tool"),
        "kt_preflight_build_dir": str(tmp_path / "dist"),
        "kt_preflight_wheelhouse": str(tmp_path / "wheelhouse"),
        "kt_preflight_python": getattr(sys, "_base_executable", sys.executable),
    }


def test_a_new_ktinfra_wheel_needs_no_index_for_dependencies_already_installed(tmp_path):
    """Before: the new wheel went in with --force-reinstall, which reinstalls typer, rich, jinja2, pyyaml,
    requests and their deps too, from the index (--no-cache-dir): after a `git pull` of ktinfra, preflight
    on a host whose index is down or gone (an offline lab, a dead mirror) failed, though only ktinfra
    changed."""
    extra = _tool_vars(tmp_path)
    rc, output = run_play(tmp_path, TOOL, extra)
    assert rc == 0, output[-3000:]
    record = tmp_path / "tool" / "dist" / ".installed-sha1"
    record.write_text("0" * 40)  # the installed ktinfra is another build than the controller's
    rc, output = run_play(tmp_path, TOOL, extra | DEAD_INDEX, env=NO_LOCAL_WHEELS)
    assert rc == 0, output[-3000:]
    assert record.read_text() != "0" * 40
    rc, output = run_play(tmp_path, TOOL, extra | DEAD_INDEX, env=NO_LOCAL_WHEELS)
    assert rc == 0 and "changed=0" in output, output[-3000:]
