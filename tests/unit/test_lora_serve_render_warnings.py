"""`ktinfra lora serve` renders its unit with render_serve, whose warnings (a plan's kt_numa_nodes out of
hwloc's order, or past the pool count: test_render_serve_numa_order) it dropped: neither its table output nor
its --json said a word. It prints them and --json has `warnings`."""

from __future__ import annotations

import json

from test_lora import peft_dir
from test_lora_cli_errors import invoke
from test_render_serve_numa_order import SWAPPED, with_nodes
from test_render_serve_numa_order import plan as plan  # noqa: F401  (the module-scoped fixture)


def _serve(tmp_path, planned: dict, *extra: str):
    tmp_path.mkdir(exist_ok=True)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(planned))
    base = tmp_path / "Qwen3-30B-A3B"
    base.mkdir()
    adapter = peft_dir(tmp_path / "out", base=str(base))
    args = ["lora", "serve", "--base", str(base), "--adapter", f"mine={adapter}", "--plan", str(plan_file)]
    return invoke([*args, "--dry-run", *extra])


def test_a_swapped_list_is_warned_in_the_table_and_the_json(tmp_path, plan):  # noqa: F811
    result = _serve(tmp_path, with_nodes(plan, [1, 0]), "--json")
    assert result.exit_code == 0, result.output
    [warning] = json.loads(result.stdout)["warnings"]
    assert warning.startswith(SWAPPED)
    shown = _serve(tmp_path / "again", with_nodes(plan, [1, 0]))
    assert shown.exit_code == 0, shown.output
    assert "warning: " + SWAPPED in " ".join(shown.output.split())


def test_hwloc_s_own_order_says_nothing(tmp_path, plan):  # noqa: F811
    result = _serve(tmp_path, with_nodes(plan, [0, 1]), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == []
    assert "warning:" not in _serve(tmp_path / "again", with_nodes(plan, [0, 1])).output
