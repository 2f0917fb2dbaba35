"""kt_router_workers given as a list: those of its URLs that are an inventory kt_serve instance's (the URL the
role derives, http://ANSIBLE_HOST:PORT) now get the checks the inventory's workers got (6ecb9a1, 3e47628):
another api_key than the router's, or a 0.0.0.0 bind (IPv4 only) at an IPv6 ansible_host. Before, a given
list skipped both, and the run ended green with a worker that answered 401, or one never reached. A URL the
inventory does not hold cannot be checked and goes on. Run by real ansible on localhost (-c local)."""

from __future__ import annotations

import json

import pytest
from role_play import run_play
from test_kt_router_review2_ipv4_only import REFUSED as IPV4_REFUSED
from test_kt_router_review2_worker_keys import REFUSED as KEY_REFUSED
from test_kt_router_role import _refused_before_any_change

INVENTORY = """\
localhost ansible_connection=local
[kt_serve]
gpu6 ansible_host=fd00::5
gpu4 ansible_host=10.0.0.7
"""
INSTANCES = {
    "gpu6": [{"name": "v4only", "port": 30000, "host": "0.0.0.0", "api_key": "k3y"}],
    "gpu4": [{"name": "otherkey", "port": 30000, "host": "0.0.0.0", "api_key": "0ther"}],
}


def _run(tmp_path, workers: list[str]):
    fresh, extra = _refused_before_any_change(tmp_path)
    extra["kt_router_workers"] = workers
    (tmp_path / "hosts").write_text(INVENTORY)
    (tmp_path / "host_vars").mkdir()
    for host, instances in INSTANCES.items():
        (tmp_path / "host_vars" / f"{host}.json").write_text(json.dumps({"kt_serve_instances": instances}))
    tasks = [{"ansible.builtin.include_role": {"name": "kt_router"}}]
    rc, output = run_play(tmp_path, tasks, extra, inventory=str(tmp_path / "hosts"))
    return fresh, rc, output


def test_a_given_url_of_an_ipv4_only_instance_at_an_ipv6_address_is_refused(tmp_path):
    fresh, rc, output = _run(tmp_path, ["http://[fd00::5]:30000", "http://10.9.9.9:30000"])
    assert rc != 0
    where = ", where the router would look for them: gpu6/v4only at fd00::5;"
    assert IPV4_REFUSED + where in output, output[-3000:]
    assert not fresh.exists()


def test_a_given_url_of_an_instance_with_another_key_is_refused(tmp_path):
    fresh, rc, output = _run(tmp_path, ["http://10.0.0.7:30000/"])  # a trailing / is the same worker
    assert rc != 0
    assert KEY_REFUSED in output and "gpu4/otherkey" in output, output[-3000:]
    assert "0ther" not in output
    assert not fresh.exists()


@pytest.mark.parametrize("url", ["http://10.9.9.9:30000", "http://10.0.0.7:30001"])
def test_given_urls_the_inventory_does_not_hold_go_on(tmp_path, url):
    """Nothing is known of them: the inventory's own problem instances are not routed to and do not count."""
    _, _, output = _run(tmp_path, [url])
    assert IPV4_REFUSED not in output and KEY_REFUSED not in output, output[-3000:]
    assert "Make the router's virtual environment" in output, output[-3000:]
