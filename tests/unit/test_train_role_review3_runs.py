"""kt_train (review 3) by real ansible-playbook on localhost, writing only into tmp_path (the helpers of
test_kt_train_role: a stand-in systemctl on PATH that records what it was asked)."""

from __future__ import annotations

import test_kt_train_role as base


def test_a_serve_instance_kt_serve_cannot_name_and_unused_plan_args_are_refused_before_any_change(tmp_path):
    """Before: serve_instance 'team/qwen3' failed at the hand-over record after the datasets were registered,
    the runs installed and the adapter converted; '../x' wrote the record outside kt_train_serve_config_dir;
    'Qwen3' wrote one no kt_serve instance reads (its names are [a-z0-9][a-z0-9_-]*). plan_args beside a
    plan_file were dropped without a word (the plan is taken as given)."""
    for name in ("slash", "up", "upper"):
        base.finished(tmp_path, name)
    runs = [
        base.run("slash", serve_instance="team/qwen3"),
        base.run("up", serve_instance="../x"),
        base.run("upper", serve_instance="Qwen3"),
        base.run("given", plan_args=["--cutoff-len", "4096"]),
        base.run("empty", plan_args=[]),  # nothing dropped: accepted
    ]
    rc, output = base.train(tmp_path, runs)
    assert rc != 0
    instance = ": serve_instance must be a kt_serve instance name, [a-z0-9][a-z0-9_-]*"
    for name in ("slash", "up", "upper"):
        assert name + instance in output, output[-3000:]
    assert "given: plan_args are not used with plan_file (the plan is taken as given): give one" in output
    assert "empty: plan_args" not in output
    for sub in ("cfg", "render", "units", "datasets", "loras"):
        assert list((tmp_path / sub).iterdir()) == [], sub
    assert not (tmp_path / "x--up.lora.json").exists() and not (tmp_path / "cfg" / "x--up.lora.json").exists()
    assert [c for c in base.systemctl_calls(tmp_path) if not c.startswith("show")] == []
    assert base.scratch_left(tmp_path) == []
