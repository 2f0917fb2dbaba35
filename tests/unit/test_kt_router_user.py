"""kt_router runs sglang-router as its own system user (kt_router_user), not root: the unit's User=/Group=,
CAP_NET_BIND_SERVICE only for a port below 1024, and a bad user name refused before any change. The unit
was run for real in a systemd container (see the commit): the router process is ktinfra-router's."""

from __future__ import annotations

import pytest
from role_play import ROLES, run_play
from test_kt_router_role import _refused_before_any_change


def router_unit(tmp_path, extra: dict) -> list[str]:
    """ktinfra-router.service.j2 rendered with the role's vars and `extra`: its [Service] lines."""
    out = tmp_path / "ktinfra-router.service"
    src = str(ROLES / "kt_router" / "templates" / "ktinfra-router.service.j2")
    tasks = [
        {"ansible.builtin.include_role": {"name": "kt_router", "tasks_from": "workers", "public": True}},
        {"ansible.builtin.template": {"src": src, "dest": str(out), "mode": "0644"}},
    ]
    rc, output = run_play(tmp_path, tasks, {"kt_router_workers": ["http://10.0.0.11:30000"]} | extra)
    assert rc == 0, output[-3000:]
    return out.read_text().splitlines()


def test_the_router_runs_as_its_own_user_without_new_privileges(tmp_path):
    """Before: the unit had no User=, so the network-facing router ran as root."""
    lines = router_unit(tmp_path, {})
    assert {"User=ktinfra-router", "Group=ktinfra-router", "NoNewPrivileges=yes"} <= set(lines)
    assert not any(line.startswith("AmbientCapabilities=") for line in lines)


def test_a_port_below_1024_gets_only_the_bind_capability(tmp_path):
    lines = router_unit(tmp_path, {"kt_router_port": 443})
    assert "AmbientCapabilities=CAP_NET_BIND_SERVICE" in lines and "User=ktinfra-router" in lines


def test_root_keeps_the_old_unit(tmp_path):
    lines = router_unit(tmp_path, {"kt_router_user": "root", "kt_router_port": 80})
    assert not any(line.startswith(("User=", "Group=", "AmbientCapabilities=")) for line in lines)
    assert "NoNewPrivileges=yes" in lines


@pytest.mark.parametrize("user", ["Router", "kt router", "-router", "r" * 33])
def test_a_user_name_useradd_refuses_is_refused_before_any_change(tmp_path, user):
    fresh, extra = _refused_before_any_change(tmp_path)
    tasks = [{"ansible.builtin.include_role": {"name": "kt_router"}}]
    rc, output = run_play(tmp_path, tasks, extra | {"kt_router_user": user})
    assert rc != 0
    assert "kt_router_user must be a user name" in output, output[-3000:]
    assert not fresh.exists()
