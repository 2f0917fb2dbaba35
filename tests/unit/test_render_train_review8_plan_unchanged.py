"""render train leaves the plan it is given as it was: it filled kt_config.kt_model_max_length (the dummy
image's room, 5f92f41) into the caller's own plan mapping, so a plan rendered twice, or written back after
rendering, carried a value the planner never chose."""

from __future__ import annotations

import copy

import pytest
from test_render_support import load_fixture_plan, render_train_here

CURRENT = "h100-qwen3-30b-a3b-sft-current.json"


@pytest.mark.parametrize("architecture", ["qwen3_5_moe", "qwen3_moe"])
def test_render_train_does_not_change_the_plan(tmp_path, architecture):
    plan = load_fixture_plan(CURRENT)
    plan["model"]["architecture"] = architecture
    plan["sft"]["template"] = None
    before = copy.deepcopy(plan)
    render_train_here(plan, tmp_path)
    assert plan == before
