"""The router's one key against the api_key of the kt_serve instances it finds in the inventory, run by real
ansible on localhost (-c local). sglang-router sends its --api-key to every worker, and SGLang answers /health
without a key (utils/auth.py): before, a router whose key was not its workers' took them in, the role's
health wait passed, and every request it forwarded got 401."""

from __future__ import annotations

import json

import pytest
from role_play import run_play
from test_kt_router_role import _refused_before_any_change

REFUSED = "kt_router_worker_api_key is not the api_key of these kt_serve instances"


def _run(tmp_path, instances: list[dict], router_key):
    """The whole role for a router on localhost in front of gpu1's `instances` (found in the inventory)."""
    fresh, extra = _refused_before_any_change(tmp_path)
    del extra["kt_router_workers"]
    extra["kt_router_worker_api_key"] = router_key
    (tmp_path / "hosts").write_text(
        "localhost ansible_connection=local\n[kt_serve]\ngpu1 ansible_host=10.0.0.7\n"
    )
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "gpu1.json").write_text(json.dumps({"kt_serve_instances": instances}))
    tasks = [{"ansible.builtin.include_role": {"name": "kt_router"}}]
    rc, output = run_play(tmp_path, tasks, extra, inventory=str(tmp_path / "hosts"))
    return fresh, rc, output


def test_a_worker_with_another_key_is_refused_before_any_change_without_showing_keys(tmp_path):
    instances = [
        {"name": "qwen", "port": 30000, "host": "0.0.0.0", "api_key": "k3y"},
        {"name": "ds", "port": 30001, "host": "0.0.0.0", "api_key": "its-own-secret"},
    ]
    fresh, rc, output = _run(tmp_path, instances, "k3y")
    assert rc != 0
    assert REFUSED + ": gpu1/ds." in output, output[-3000:]
    assert "its-own-secret" not in output and "k3y" not in output
    assert not fresh.exists()


@pytest.mark.parametrize(
    ("instance_key", "router_key"),
    [("k3y", "k3y"), (1234, "1234"), (None, "k3y")],
    ids=["same-key", "digits-unquoted", "worker-without-key"],
)
def test_workers_the_router_key_opens_pass_the_check(tmp_path, instance_key, router_key):
    """The same key (an unquoted digit key as text, as kt_serve writes it), or a worker without one (it takes
    any request): the run goes on to the venv, which fails here on purpose (no sglang-router download)."""
    instances = [{"name": "qwen", "port": 30000, "host": "0.0.0.0", "api_key": instance_key}]
    _, _, output = _run(tmp_path, instances, router_key)
    assert REFUSED not in output
    assert "Make the router's virtual environment" in output, output[-3000:]
