"""kt_preflight's ktinfra install (tasks/tool.yml) run for real on localhost: a wheel built from this checkout
into a venv under tmp_path, with pip's index first unreachable, then reachable."""

from __future__ import annotations

import hashlib
import sys

from role_play import run_play

TOOL = [{"ansible.builtin.include_role": {"name": "kt_preflight", "tasks_from": "tool"}}]
# the install's index down (the wheel build on the "controller" still reaches PyPI; no local find-links)
DEAD_INDEX = {"kt_preflight_pip_index_url": "http://127.0.0.1:9/simple"}
NO_LOCAL_WHEELS = {"PIP_CONFIG_FILE": "/dev/null"}


def test_a_first_install_that_failed_is_installed_by_the_next_run(tmp_path):
    """Before: the wheel copy had landed, so the next run skipped the install and preflight passed with no
    ktinfra in the venv (every later role then failed on the missing executable)."""
    tool = tmp_path / "tool"
    extra = {
        "kt_preflight_tool_dir": str(tool),
        "kt_preflight_build_dir": str(tmp_path / "dist"),
        "kt_preflight_wheelhouse": str(tmp_path / "wheelhouse"),
        "kt_preflight_python": getattr(sys, "_base_executable", sys.executable),
        "kt_preflight_pip_timeout": 3,
    }
    (tmp_path / "wheelhouse").mkdir()
    rc, output = run_play(tmp_path, TOOL, extra | DEAD_INDEX, env=NO_LOCAL_WHEELS)
    assert rc != 0 and "Install ktinfra and its dependencies" in output, output[-3000:]
    assert not (tool / "bin" / "ktinfra").exists()
    rc, output = run_play(tmp_path, TOOL, extra)
    assert rc == 0, output[-3000:]
    assert (tool / "bin" / "ktinfra").exists()
    [wheel] = (tool / "dist").glob("ktinfra-*.whl")
    assert (tool / "dist" / ".installed-sha1").read_text() == hashlib.sha1(wheel.read_bytes()).hexdigest()
    rc, output = run_play(tmp_path, TOOL, extra)  # installed and recorded: nothing to do
    assert rc == 0 and "changed=0" in output, output[-3000:]
