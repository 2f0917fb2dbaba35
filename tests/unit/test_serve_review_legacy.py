"""Serving on the legacy stack (kt-0.4-autodl): only what its sglang fork and kt-kernel v0.4.4 take.

Upstream facts: kvcache-ai/sglang eaf832efc2ec (the profile's fork) python/sglang/srt/server_args.py has
every flag sglang_argv emits but --kt-numa-nodes (added to sglang-kt in a53cb6d0, 2026-03-31);
kvcache-ai/ktransformers v0.4.4 (0bce173e) kt-kernel/python/experts.py KTMoEWrapper takes AMXINT4, AMXINT8,
RAWINT4, LLAMAFILE, MOE_INT4 and MOE_INT8 and raises "Unsupported method" for anything else, and the fork's
kt_ep_wrapper.py create_weights builds that wrapper on every MoE layer, also with every expert on the GPU.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_kt_serve_role import instance, run_role, serve_args
from test_render_support import load_fixture_plan

from ktinfra import facts as facts_module
from ktinfra.plan.formats import LEGACY_KT_METHODS
from ktinfra.planner import plan as make_plan
from ktinfra.render import RenderError, render_serve, sglang_argv

REPO = Path(__file__).resolve().parents[2]
HOSTS = REPO / "tests" / "fixtures" / "hosts"


def _node1_plan(tmp_path: Path, stack: str) -> dict:
    """The real planner on the 2-socket capture whose cpuset is node 1's CPUs only (a container pinned to
    the second socket): its one thread pool is named onto node 1 (kt_numa_nodes [1]). The planner does so on
    the current stack only (bc49f89's follow-up keeps a legacy plan's pools on nodes 0..n-1): a legacy plan
    that names nodes is an older or hand-edited one, made here by moving the current plan to that stack."""
    capture = tmp_path / "n1"
    shutil.copytree(HOSTS / "synthetic-2s-8470q-amx", capture)
    (capture / "cgroup.txt").write_text("/sys/fs/cgroup/cpuset.cpus.effective: 52-103\n")
    result = make_plan(facts_module.from_capture(capture), "Qwen3-30B-A3B", "serve")
    assert result["feasible"], result["problems"]
    assert result["serve"]["kt_numa_nodes"] == [1]
    if stack != "kt-0.7":
        legacy = make_plan(facts_module.from_capture(capture), "Qwen3-30B-A3B", "serve", stack=stack)
        assert legacy["serve"]["kt_numa_nodes"] is None
        result.update(stack=legacy["stack"], stack_generation=legacy["stack_generation"])
    return result


def test_a_legacy_plan_naming_numa_nodes_is_refused_before_anything_is_written(tmp_path):
    """Before: the unit ran `--kt-numa-nodes 1`, which the legacy fork's argparse refuses (unrecognized
    arguments), so the server stopped at once, was restarted and stopped three times; now render refuses."""
    plan = _node1_plan(tmp_path, "kt-0.4-autodl")
    plan["serve"]["kt_method"] = "AMXINT8"  # a method v0.4.4 runs: only the node list is wrong
    with pytest.raises(RenderError, match=r"kt_numa_nodes is \[1\], but the legacy stack kt-0.4-autodl's"):
        sglang_argv(plan, model_path="/m", weight_path="/w-INT8")
    out = tmp_path / "out"
    plan_file = tmp_path / "legacy.json"
    plan_file.write_text(json.dumps(plan))
    args = ["render", "serve", "--plan", str(plan_file), "--name", "q", "--model-path", "/m"]
    args += ["--weight-path", "/w-INT8", "--out", str(out)]
    proc = subprocess.run([sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1 and "has no --kt-numa-nodes" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_the_current_stack_still_names_the_pools_nodes(tmp_path):
    plan = _node1_plan(tmp_path, "kt-0.7")
    argv = render_serve(plan, name="q", model_path="/m", weight_path="/w").info["argv"]
    assert argv[argv.index("--kt-numa-nodes") : argv.index("--kt-numa-nodes") + 2] == ["--kt-numa-nodes", "1"]


def test_a_legacy_plan_on_cores_of_nodes_0_to_n_renders():
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    assert plan["stack_generation"] == "legacy" and plan["serve"].get("kt_numa_nodes") is None
    assert "--kt-numa-nodes" not in sglang_argv(plan, model_path="/m", weight_path="/w-INT8")


def test_the_roles_legacy_methods_are_renders():
    listed = yaml.safe_load((REPO / "roles" / "kt_serve" / "vars" / "main.yml").read_text())
    assert sorted(listed["kt_serve__legacy_kt_methods"]) == sorted(LEGACY_KT_METHODS)


@pytest.mark.parametrize("generation", ["legacy", "current"])
def test_the_role_refuses_a_method_legacy_kt_kernel_lacks_before_anything_is_written(tmp_path, generation):
    """The planner serves from the checkpoint's own BF16 where the GPUs hold every expert, also on the legacy
    stack (h100 capture, Qwen3-30B-A3B). Before: kt_serve installed and started `--kt-method BF16` there,
    and kt-kernel v0.4.4 stopped the server while loading ("Unsupported method: BF16")."""
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    plan["serve"]["kt_method"] = "BF16"
    if generation == "current":
        plan.update(stack="kt-0.7", stack_generation="current")
    plan_file = tmp_path / "bf16.json"
    plan_file.write_text(json.dumps(plan))
    entry = instance(tmp_path, "bf", 30000, plan_file=str(plan_file))
    del entry["weight_path"]  # a native method reads the model's own directory
    rc, output = run_role(tmp_path, {"kt_serve_instances": [entry]})
    if generation == "current":
        assert rc == 0, output[-3000:]
        assert "--kt-method BF16 " in serve_args(tmp_path, "bf")
        return
    assert rc != 0
    assert "bf: the plan's kt_method is BF16, which the legacy stack kt-0.4-autodl does not run" in output, (
        output[-3000:]
    )
    assert list((tmp_path / "cfg").iterdir()) == [] and list((tmp_path / "render").iterdir()) == []
