"""kt_preflight under --check, run for real on localhost with its tool venv under tmp_path: a host without a
working ktinfra stops at once with one message saying why --check cannot go further, and nothing is built,
copied or created."""

from __future__ import annotations

import subprocess
import sys

import pytest
from role_play import run_play

# the OS facts its vars files are chosen by, as a play with gather_facts has them
PREFLIGHT = [
    {"ansible.builtin.setup": {"gather_subset": ["min"]}},
    {"ansible.builtin.include_role": {"name": "kt_preflight"}},
]
TOOL = [{"ansible.builtin.include_role": {"name": "kt_preflight", "tasks_from": "tool"}}]


def _extra(tmp_path) -> dict:
    (tmp_path / "wheelhouse").mkdir(exist_ok=True)
    return {
        "kt_preflight_tool_dir": str(tmp_path / "tool"),
        "kt_preflight_build_dir": str(tmp_path / "dist"),
        "kt_preflight_wheelhouse": str(tmp_path / "wheelhouse"),
        "kt_preflight_python": getattr(sys, "_base_executable", sys.executable),
    }


def test_check_on_a_fresh_host_stops_once_before_building_or_copying_anything(tmp_path):
    """Before: the controller built the ktinfra wheel, the tool venv and the wheel copy were reported as
    changes, then the stop came twice: as a failed task, then from the rescue as "preflight failed: ..."."""
    rc, output = run_play(tmp_path, PREFLIGHT, _extra(tmp_path), flags=["--check"])
    assert rc != 0 and "changed:" not in output and "changed=0" in output, output[-3000:]
    assert "preflight failed" not in output and "rescued=0" in output, output[-3000:]
    message = f"--check cannot go further on this host: ktinfra is not installed in {tmp_path / 'tool'} yet"
    assert output.count(message) == 2, output[-3000:]  # the task's [ERROR] line and its result, nothing more
    assert not (tmp_path / "tool").exists() and not (tmp_path / "dist").exists()


# slow: a second scenario of the same stop (one message before anything is built, no rescue) as
# test_check_on_a_fresh_host_stops_once_before_building_or_copying_anything
@pytest.mark.slow
def test_check_with_a_ktinfra_that_does_not_run_says_so(tmp_path):
    """A tool venv whose ktinfra lost a dependency (here: pip uninstall typer). Before: --check went on and
    stopped in the facts task with "preflight failed: non-zero return code"."""
    extra = _extra(tmp_path)
    rc, output = run_play(tmp_path, TOOL, extra)
    assert rc == 0, output[-3000:]
    pip = tmp_path / "tool" / "bin" / "pip"
    subprocess.run([pip, "uninstall", "--quiet", "--yes", "typer"], check=True, capture_output=True)
    rc, output = run_play(tmp_path, PREFLIGHT, extra, flags=["--check"])
    message = (
        f"--check cannot go further on this host: {tmp_path / 'tool' / 'bin' / 'ktinfra'} does not run ("
    )
    assert rc != 0 and message in output and "No module named 'typer'" in output, output[-3000:]
    assert "preflight failed" not in output, output[-3000:]
