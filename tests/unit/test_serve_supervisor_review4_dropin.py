"""kt_serve under supervisord: a kt_serve_unit_dropin (systemd [Service] settings) was dropped without a word.
The role's own task, run for real on localhost, now says so; without a drop-in it says nothing."""

from __future__ import annotations

import yaml
from role_play import REPO, run_play

TASKS = REPO / "roles" / "kt_serve" / "tasks" / "supervisor.yml"


def _say_task() -> dict:
    return next(t for t in yaml.safe_load(TASKS.read_text()) if "drop-in" in t.get("name", ""))


def test_a_drop_in_under_supervisord_is_named(tmp_path):
    rc, output = run_play(tmp_path, [_say_task()], {"kt_serve_unit_dropin": "CPUAffinity=0-15"})
    assert rc == 0, output[-3000:]
    assert "kt_serve_unit_dropin is a systemd drop-in" in output
    assert "systemd is not init on localhost, so supervisord runs the instances without it" in output


def test_no_drop_in_says_nothing(tmp_path):
    rc, output = run_play(tmp_path, [_say_task()], {"kt_serve_unit_dropin": ""})
    assert rc == 0 and "skipping: [localhost]" in output, output[-3000:]
