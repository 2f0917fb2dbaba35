"""kt_train keeps a run's plan as private as its env file: the plan's sft.launcher.env becomes RUN.env (0600)
and may hold a token (real ansible on localhost, the stand-in systemctl of test_kt_train_role)."""

from __future__ import annotations

import json

import pytest
from test_kt_train_role import FILES, run, train

TOKEN = "hf_planted0secret"


# slow: RUN.env and the kept RUN.plan.json with the plan's secrets, both 0600, are checked in
# test_kt_train_review10_launcher_secrets.py's
# test_launcher_env_secrets_stay_out_of_vvv_and_job_events_but_reach_the_env_file
@pytest.mark.slow
def test_a_token_in_the_plans_launcher_env_is_in_no_file_others_can_read(tmp_path):
    """Before: RUN.env was 0600, but the plan it came from was installed as cfg/RUN.plan.json 0644."""
    plan = json.loads((FILES / "plan-tiny-sft.json").read_text())
    plan["sft"]["launcher"]["env"]["HF_TOKEN"] = TOKEN
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    plan_file.chmod(0o600)
    rc, output = train(tmp_path, [run("secret", plan_file=str(plan_file))])
    assert rc == 0, output[-3000:]
    holding = [p for sub in ("cfg", "render") for p in (tmp_path / sub).rglob("*") if p.is_file()]
    holding = [p for p in holding if TOKEN in p.read_text()]
    assert {p.name for p in holding} >= {"secret.env", "secret.plan.json"}
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in holding} == {p.name: "0o600" for p in holding}
