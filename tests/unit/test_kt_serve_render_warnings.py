"""kt_serve renders a plan_file's kt_numa_nodes as it is; where render serve warns of it (a list out of
hwloc's order, render/serve.py numa_warnings), the play's output says so under the instance's name, and it
says nothing for a list in order. Real ansible on localhost, everything in tmp_path (test_kt_serve_role)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_kt_serve_role import PLAN, instance, run_role, serve_args

WARNING = "qwen: kt_numa_nodes 1 0 is not hwloc's order 0..1: pool 0 runs on hwloc node 1"


def two_pool_plan(tmp: Path, nodes: list[int]) -> Path:
    plan = json.loads(PLAN.read_text())
    plan["serve"] |= {"kt_threadpool_count": 2, "kt_numa_nodes": nodes}
    path = tmp / "plan-2-pools.json"
    path.write_text(json.dumps(plan))
    return path


@pytest.mark.parametrize(
    "nodes",
    [
        # slow: the list rendered as given and render's warning shown under the instance's name, as in
        # test_kt_serve_numa_nodes_override.py's
        # test_a_reordered_list_is_rendered_with_renders_warning[instance]
        pytest.param([1, 0], marks=pytest.mark.slow),
        # slow: nothing shown where render warns of nothing, as in test_kt_serve_numa_nodes_override.py's
        # test_null_drops_the_flag_the_plan_file_names (render's warnings: test_render_serve_numa_order.py)
        pytest.param([0, 1], marks=pytest.mark.slow),
    ],
)
def test_the_play_shows_what_render_warns_of(tmp_path, nodes):
    plan = two_pool_plan(tmp_path, nodes)
    qwen = instance(tmp_path, "qwen", 30000, plan_file=str(plan))
    rc, output = run_role(tmp_path, {"kt_serve_instances": [qwen]})
    assert rc == 0, output
    assert f"--kt-numa-nodes {' '.join(map(str, nodes))} " in serve_args(tmp_path, "qwen")
    if nodes == [1, 0]:
        assert WARNING in output
    else:  # the control: nothing to warn of
        assert "hwloc's order" not in output
