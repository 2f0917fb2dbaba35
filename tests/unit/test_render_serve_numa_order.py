"""`ktinfra render serve` took any kt_numa_nodes a plan held (a plan file's, or one kt_serve composed) without
a word, though a list that is not hwloc's 0..n-1 splits each moved pool's weights over two nodes in kt-kernel
0.7.2 (plan.host.numa_ids_out_of_order), and one with an id at or past the pool count reads past a vector
(plan.host.numa_ids_past_pools). Render serves the list as asked and says so: info/--json `warnings`, and a
`warning:` line in the table output. The plan: the real planner's on the synthetic dual-socket host (2 pools,
kt_numa_nodes null), with the list set by hand as a plan file would."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.render import render_serve

REPO = Path(__file__).resolve().parents[2]
HOST = REPO / "tests" / "fixtures" / "hosts" / "synthetic-2s-8470q-amx"
MODEL = "/models/Qwen3-30B-A3B"
SWAPPED = "kt_numa_nodes 1 0 is not hwloc's order 0..1: pool 0 runs on hwloc node 1, its distributor binds to"


@pytest.fixture(scope="module")
def plan() -> dict:
    args = ["plan", "--model", "Qwen3-30B-A3B", "--from", str(HOST), "--json"]
    proc = subprocess.run([sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    planned = json.loads(proc.stdout)
    assert (planned["serve"]["kt_threadpool_count"], planned["serve"]["kt_numa_nodes"]) == (2, None)
    return planned


def with_nodes(plan: dict, nodes: object) -> dict:
    changed = copy.deepcopy(plan)
    changed["serve"]["kt_numa_nodes"] = nodes
    return changed


def rendered_info(plan: dict) -> dict:
    return render_serve(plan, name="qwen", model_path=MODEL).info


def test_a_swapped_list_is_rendered_and_warned(plan):
    info = rendered_info(with_nodes(plan, [1, 0]))
    assert info["argv"][info["argv"].index("--kt-numa-nodes") :][:3] == ["--kt-numa-nodes", "1", "0"]
    [warning] = info["warnings"]
    assert warning.startswith(SWAPPED)
    assert "kernel node" not in warning  # the plan holds no hwloc order: the indices are named alone
    assert warning.endswith("so their order gains nothing")


@pytest.mark.parametrize("nodes", [[0, 1], None])
def test_hwloc_s_own_order_or_none_is_not_warned(plan, nodes):
    assert rendered_info(with_nodes(plan, nodes))["warnings"] == []


def test_an_id_past_the_pools_is_warned_once_without_the_kernel_s_nodes(plan):
    [warning] = rendered_info(with_nodes(plan, [0, 2]))["warnings"]
    assert warning.startswith("kt_numa_nodes 0 2 for 2 pool(s): id(s) 2 at or past the pool count: ")
    assert "WorkerPool::init" in warning and "not hwloc's order" not in warning


def test_an_id_past_the_pools_the_plan_warned_of_keeps_the_plan_s_words(plan):
    planned = with_nodes(plan, [0, 2])
    own = "kt_numa_nodes 0 2 (kernel node(s) 1, 3) for 2 pool(s): the planner's words"
    planned["warnings"] = ["another warning", own]
    assert rendered_info(planned)["warnings"] == [own]


def cli(plan: dict, tmp_path: Path, *more: str):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    args = ["render", "serve", "--plan", str(plan_file), "--name", "qwen", "--model-path", MODEL]
    return CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out"), *more])


def test_the_cli_prints_the_warning_in_its_table_output_and_json(plan, tmp_path):
    table = cli(with_nodes(plan, [1, 0]), tmp_path)
    assert table.exit_code == 0, table.output
    lines = [line for line in table.output.splitlines() if line.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith(f"warning: {SWAPPED}")
    doc = json.loads(cli(with_nodes(plan, [1, 0]), tmp_path, "--json").output)
    [warning] = doc["warnings"]
    assert warning.startswith(SWAPPED)


@pytest.mark.parametrize("nodes", [[0, 1], None])
def test_the_cli_says_nothing_for_hwloc_s_order(plan, tmp_path, nodes):
    table = cli(with_nodes(plan, nodes), tmp_path)
    assert table.exit_code == 0, table.output
    assert "warning" not in table.output
    assert json.loads(cli(with_nodes(plan, nodes), tmp_path, "--json").output)["warnings"] == []
