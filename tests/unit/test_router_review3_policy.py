"""kt_router_policy takes what sglang-router 0.3.2's --policy takes (its --help: random, round_robin,
cache_aware, power_of_two, manual), run by real ansible on localhost (-c local). Before, the argument spec
refused manual. tests/integration/operate/test_router_review3_real_wait.py compares the list with the real
router's --help."""

from __future__ import annotations

import yaml
from role_play import ROLES, run_play
from test_kt_router_role import _refused_before_any_change
from test_kt_router_settings import router_env


def spec_choices() -> list[str]:
    spec = yaml.safe_load((ROLES / "kt_router" / "meta" / "argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"]["kt_router_policy"]["choices"]


def test_the_manual_policy_passes_the_checks_and_reaches_the_router(tmp_path):
    _, extra = _refused_before_any_change(tmp_path)
    extra["kt_router_policy"] = "manual"
    rc, output = run_play(tmp_path, [{"ansible.builtin.include_role": {"name": "kt_router"}}], extra)
    assert "value of kt_router_policy must be one of" not in output, output[-3000:]
    assert "Make the router's virtual environment" in output, output[-3000:]  # past every check
    assert "--policy manual " in router_env(tmp_path, {"kt_router_policy": "manual"})


def test_the_spec_lists_the_policies_of_sglang_router_0_3_2():
    assert spec_choices() == ["random", "round_robin", "cache_aware", "power_of_two", "manual"]
