"""An instance set to state: absent is being removed: it binds no port and needs no API key any more."""

from __future__ import annotations

from test_kt_serve_role import instance, run_role, serve_args


def test_a_replacement_takes_the_port_of_the_instance_it_removes_whose_key_is_gone(tmp_path):
    """Renaming an instance: the old name set to absent (its key already out of the vault), the new one on its
    port. Before, the role refused the whole list ("duplicate port 30000 (instances old, new)", "old: binds
    0.0.0.0 without api_key"), so the old instance could not be removed without keeping its port and key."""
    old = {"name": "old", "port": 30000, "host": "0.0.0.0", "state": "absent"}
    new = instance(tmp_path, "new", 30000)
    rc, output = run_role(tmp_path, {"kt_serve_instances": [old, new]})
    assert rc == 0, output[-3000:]
    assert "--port 30000 " in serve_args(tmp_path, "new")
    assert sorted(p.name for p in (tmp_path / "cfg").iterdir()) == ["new.plan.json"]


def test_two_instances_that_run_still_may_not_share_a_port_or_bind_without_a_key(tmp_path):
    stopped = instance(tmp_path, "a", 30000, state="stopped", host="0.0.0.0")
    rc, output = run_role(tmp_path, {"kt_serve_instances": [stopped, instance(tmp_path, "b", 30000)]})
    assert rc != 0
    assert "duplicate port 30000 (instances a, b)" in output and "a: binds 0.0.0.0 without api_key" in output
    assert list((tmp_path / "cfg").iterdir()) == []
