"""render serve judges a _layer_N/_numa_M tree by the kernel that named its .kt files (kt-kernel
operators/amx/moe.hpp and operators/moe_kernel/moe.hpp open T::name() + "_up_E_…Byte_quant_.kt": INT8/INT4
for AMXINT8/AMXINT4, MOE_INT8/MOE_INT4 for the general kernels, moe_kernel/la/kernel.hpp). Before: a MOE_*
tree passed under an AMX method (and an AMX tree under a MOE_* method), so the server loads no experts; and a
pool folder holding two kernels' files was judged by whichever file the listing gave first."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from int8_tree import write_tree
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError, render_serve

MODEL = "/models/Qwen3-30B-A3B"


@pytest.fixture
def plan():
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    assert plan["serve"]["kt_method"] == "AMXINT8" and plan["serve"]["kt_threadpool_count"] == 2
    return plan


def _serve(plan, method, tree):
    plan["serve"]["kt_method"] = method
    return render_serve(plan, name="q", model_path=MODEL, weight_path=str(tree))


@pytest.mark.parametrize(
    ("method", "kernel"),
    [("AMXINT8", "MOE_INT8"), ("AMXINT4", "MOE_INT4"), ("MOE_INT8", "INT8"), ("MOE_INT4", "INT4"),
     ("MOE_INT8", "MOE_INT4"), ("AMXINT8", "MOE_INT4")],
)  # fmt: skip
def test_a_tree_of_another_kernel_is_refused(plan, tmp_path, method, kernel):
    tree = write_tree(tmp_path / "cpu-weights", numa=2, kernel=kernel)
    with pytest.raises(
        RenderError, match=rf"kt_method is {method}, but --weight-path .* holds {kernel} weights"
    ):
        _serve(plan, method, tree)


@pytest.mark.parametrize("kernel", ["MOE_INT8", "MOE_INT4"])
def test_the_own_kernels_tree_still_renders(plan, tmp_path, kernel):
    tree = write_tree(tmp_path / "cpu-weights", numa=2, kernel=kernel)
    assert _serve(plan, kernel, tree)
    assert _serve(plan, "AMX" + kernel[4:], write_tree(tmp_path / "amx", numa=2, kernel=kernel[4:]))


def test_two_kernels_in_one_folder_do_not_hang_on_listing_order(plan, tmp_path):
    """Both kernels' files are whole: either method finds all it opens. The old code took the kernel of
    whichever file the listing gave first, so in any listing order it refused one of the two methods."""
    trees = []
    for n, order in enumerate((("INT8", "INT4"), ("INT4", "INT8"))):
        root = tmp_path / f"mixed{n}"
        for kernel in order:
            write_tree(root, numa=2, kernel=kernel, experts=16)
        trees.append(root)
    for tree in trees:
        for method in ("AMXINT8", "AMXINT4"):
            assert _serve(plan, method, tree)


def test_cli_refuses_an_amx_tree_under_moe_int8(tmp_path):
    """A real `ktinfra render serve` run: one line, exit 1, --out not made."""
    import json

    p = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    p["serve"]["kt_method"] = "MOE_INT8"
    (tmp_path / "plan.json").write_text(json.dumps(p))
    tree = write_tree(tmp_path / "cpu-weights", numa=2, kernel="INT8")
    r = subprocess.run(
        [sys.executable, "-m", "ktinfra", "render", "serve", "--name", "q",
         "--plan", str(tmp_path / "plan.json"), "--model-path", MODEL,
         "--weight-path", str(tree), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error: the plan's kt_method is MOE_INT8, but --weight-path")
    assert "holds INT8 weights (by its files)" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
