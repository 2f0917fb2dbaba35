"""A kt_serve instance bound to 0.0.0.0 listens on IPv4 only, and the router looks for it at its host's
ansible_host: where that is an IPv6 literal nothing answered there. Before, the run ended green (the router's
own /health answers), sglang-router kept trying to add the worker for 7 days (--worker-startup-timeout-secs)
and sent every request to the others. Run by real ansible on localhost (-c local)."""

from __future__ import annotations

import json

import pytest
from role_play import run_play
from test_kt_router_review2_worker_keys import REFUSED as KEY_REFUSED
from test_kt_router_role import _refused_before_any_change

REFUSED = "these kt_serve instances bind 0.0.0.0 (IPv4 only) on a host whose ansible_host is an IPv6 address"


def _run(tmp_path, address: str, bind: str):
    fresh, extra = _refused_before_any_change(tmp_path)
    del extra["kt_router_workers"]
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local\n[kt_serve]\ngpu1 ansible_host={address}\n"
    )
    (tmp_path / "host_vars").mkdir()
    instances = [{"name": "qwen", "port": 30000, "host": bind, "api_key": "k3y"}]
    (tmp_path / "host_vars" / "gpu1.json").write_text(json.dumps({"kt_serve_instances": instances}))
    tasks = [{"ansible.builtin.include_role": {"name": "kt_router"}}]
    rc, output = run_play(tmp_path, tasks, extra, inventory=str(tmp_path / "hosts"))
    return fresh, rc, output


def test_an_ipv4_only_worker_at_an_ipv6_address_is_refused_before_any_change(tmp_path):
    fresh, rc, output = _run(tmp_path, "fd00::5", "0.0.0.0")
    assert rc != 0
    assert REFUSED + ", where the router would look for them: gpu1/qwen at fd00::5;" in output, output[-3000:]
    assert not fresh.exists()


@pytest.mark.parametrize(
    ("address", "bind"), [("fd00::5", "::"), ("10.0.0.7", "0.0.0.0")], ids=["v6-any", "v4"]
)
def test_a_worker_listening_at_its_hosts_address_passes(tmp_path, address, bind):
    """:: takes IPv6 (and IPv4); an IPv4 ansible_host reaches 0.0.0.0: on to the venv (failing here)."""
    _, _, output = _run(tmp_path, address, bind)
    assert REFUSED not in output and KEY_REFUSED not in output
    assert "Make the router's virtual environment" in output, output[-3000:]
