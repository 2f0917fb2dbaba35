"""kt_router refuses a relative kt_router_unit_dir before any change. Before, the unit went under the remote
user's working directory, where systemd never looks, and 'Enable and start the router' failed ("Could not find
the requested service") after the venv, the router's user and router.env were made."""

from __future__ import annotations

import pytest
from role_play import run_play
from test_kt_router_role import _refused_before_any_change

REFUSED = "kt_router_unit_dir must be an absolute path"


@pytest.mark.parametrize("unit_dir", ["units", "./etc/systemd/system"])
def test_a_relative_unit_dir_is_refused_before_any_change(tmp_path, unit_dir):
    fresh, extra = _refused_before_any_change(tmp_path)
    extra["kt_router_unit_dir"] = unit_dir
    tasks = [{"ansible.builtin.include_role": {"name": "kt_router"}}]
    rc, output = run_play(tmp_path, tasks, extra)
    assert rc != 0
    assert f'{REFUSED}, as /etc/systemd/system, not "{unit_dir}"' in output, output[-3000:]
    assert not fresh.exists()
    assert "Make the router's virtual environment" not in output  # stopped before the venv


def test_an_absolute_unit_dir_goes_on_to_the_venv(tmp_path):
    """The same run with an absolute directory passes the checks (and fails at the venv under a file)."""
    fresh, extra = _refused_before_any_change(tmp_path)
    tasks = [{"ansible.builtin.include_role": {"name": "kt_router"}}]
    rc, output = run_play(tmp_path, tasks, extra)
    assert rc != 0
    assert REFUSED not in output and "Make the router's virtual environment" in output, output[-3000:]
