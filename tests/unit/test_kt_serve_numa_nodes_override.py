"""kt_numa_nodes as a kt_serve override, the remedy plan.host's NUMA warnings name: null drops
--kt-numa-nodes (kt-kernel's default 0..n-1), a list of one id >= 0 per thread pool of the plan is rendered
as given (render serve's warnings shown), anything else is refused before anything is written. Before, the
role refused the key itself ('unknown key kt_numa_nodes'). Real ansible on localhost, everything in tmp_path
(test_kt_serve_role)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from test_kt_serve_render_warnings import WARNING, two_pool_plan
from test_kt_serve_role import PLAN, instance, run_role, serve_args

from ktinfra.plan.host import numa_ids_past_pools


def nothing_written(tmp) -> bool:
    return list((tmp / "cfg").iterdir()) == [] and list((tmp / "render").iterdir()) == []


def remedy_overrides() -> dict:
    """The kt_serve_overrides that plan.host's warning for an id past the pools names, as YAML."""
    warning = numa_ids_past_pools([1], [1])
    return yaml.safe_load(re.search(r"kt_serve_overrides (\{[^}]*\})", warning).group(1))


@pytest.mark.parametrize(
    "nodes",
    [
        [1],
        # slow: null drops the flag whatever the plan's pool count, as in the [1] case
        pytest.param([1, 0], marks=pytest.mark.slow),
    ],
)
def test_null_drops_the_flag_the_plan_file_names(tmp_path, nodes):
    """[1] for one pool is numa_ids_past_pools' case (a container on node 1 with mems 0-1)."""
    plan = json.loads(PLAN.read_text())
    plan["serve"] |= {"kt_threadpool_count": len(nodes), "kt_numa_nodes": nodes}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    overrides = remedy_overrides()
    assert overrides == {"kt_numa_nodes": None}
    qwen = instance(tmp_path, "qwen", 30000, plan_file=str(tmp_path / "plan.json"))
    rc, output = run_role(tmp_path, {"kt_serve_overrides": overrides, "kt_serve_instances": [qwen]})
    assert rc == 0, output[-3000:]
    args = serve_args(tmp_path, "qwen")
    assert f"--kt-threadpool-count {len(nodes)} " in args and "--kt-numa-nodes" not in args
    assert json.loads((tmp_path / "cfg" / "qwen.plan.json").read_text())["serve"]["kt_numa_nodes"] is None
    assert "hwloc's order" not in output and "at or past the pool count" not in output  # nothing to warn of


@pytest.mark.parametrize(
    "where",
    [
        # slow: an overridden list rendered as given, with render's warning: the instance case (its overrides
        # combined with kt_serve_overrides); kt_serve_overrides alone reach the plan in
        # test_null_drops_the_flag_the_plan_file_names
        pytest.param("kt_serve_overrides", marks=pytest.mark.slow),
        "instance",
    ],
)
def test_a_reordered_list_is_rendered_with_renders_warning(tmp_path, where):
    plan = two_pool_plan(tmp_path, None)
    given = {"kt_numa_nodes": [1, 0]}
    if where == "instance":  # the instance's own wins over kt_serve_overrides
        qwen = instance(tmp_path, "qwen", 30000, plan_file=str(plan), overrides=given)
        extra = {"kt_serve_overrides": {"kt_numa_nodes": None}, "kt_serve_instances": [qwen]}
    else:
        extra = {
            "kt_serve_overrides": given,
            "kt_serve_instances": [instance(tmp_path, "qwen", 30000, plan_file=str(plan))],
        }
    rc, output = run_role(tmp_path, extra)
    assert rc == 0, output[-3000:]
    assert "--kt-threadpool-count 2 --kt-numa-nodes 1 0 " in serve_args(tmp_path, "qwen")
    assert WARNING in output


SHAPE = "kt_numa_nodes must be null or a list of NUMA node ids >= 0, one per thread pool, got "
POOLS = "but the plan has 2 thread pool(s) (serve.kt_threadpool_count): give one id per pool, or null to drop"
REFUSED = {
    "one id for two pools": (
        {"kt_serve_overrides": {"kt_numa_nodes": [0]}},
        f"qwen: kt_serve_overrides.kt_numa_nodes [0] lists 1 NUMA node id(s), {POOLS} --kt-numa-nodes",
    ),
    "three ids for two pools, the instance's": (
        {"overrides": {"kt_numa_nodes": [0, 1, 2]}},
        f"qwen: overrides.kt_numa_nodes [0, 1, 2] lists 3 NUMA node id(s), {POOLS}",
    ),
    "an empty list": (
        {"kt_serve_overrides": {"kt_numa_nodes": []}},
        f"qwen: kt_serve_overrides.kt_numa_nodes [] lists 0 NUMA node id(s), {POOLS}",
    ),
    "a string": ({"kt_serve_overrides": {"kt_numa_nodes": "0 1"}}, f'kt_serve_overrides.{SHAPE}\\"0 1\\"'),
    "a negative id": (
        {"kt_serve_overrides": {"kt_numa_nodes": [-1, 0]}},
        f"kt_serve_overrides.{SHAPE}[-1, 0]",
    ),
    "booleans, the instance's": (
        {"overrides": {"kt_numa_nodes": [True, False]}},
        f"qwen: overrides.{SHAPE}[true, false]",
    ),
    "a number": ({"kt_serve_overrides": {"kt_numa_nodes": 1}}, f"kt_serve_overrides.{SHAPE}1"),
}


@pytest.mark.parametrize(
    "case",
    [
        "a negative id",
        "a number",
        "a string",
        # slow: render.yml's check of the count (0 ids for 2 pools), as in the "one id for two pools" case
        pytest.param("an empty list", marks=pytest.mark.slow),
        "booleans, the instance's",
        "one id for two pools",
        "three ids for two pools, the instance's",
    ],
)
def test_a_bad_kt_numa_nodes_is_refused_before_anything_is_written(tmp_path, case):
    given, message = REFUSED[case]
    plan = two_pool_plan(tmp_path, None)
    qwen = instance(tmp_path, "qwen", 30000, plan_file=str(plan), overrides=given.get("overrides", {}))
    rc, output = run_role(
        tmp_path, {"kt_serve_overrides": given.get("kt_serve_overrides", {}), "kt_serve_instances": [qwen]}
    )
    assert rc != 0
    assert message in output, output[-3000:]
    assert nothing_written(tmp_path)
