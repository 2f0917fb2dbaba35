"""render train: a converted tree on this machine whose .kt files another kernel wrote than the recipe's
backend opens is refused (kt-kernel 0.7.2 sft/amx.py takes any _layer_N/_numa_0/*.kt as the backend's own
layout; its C++ opens T::name() + "_up_E_…kt": INT8_ for int8, INT4_ for AMXINT4). Before, an INT8 tree with
--weight-format int4 (or a path named -INT4) rendered kt_backend AMXINT4, and the run stopped loading."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from int8_tree import write_tree
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError
from ktinfra.render.train import render_train

PLAN = Path(__file__).resolve().parents[1] / "fixtures" / "plans" / "h100-qwen3-30b-a3b-sft-current.json"


def _train(tree, weight_format=None):
    plan = load_fixture_plan(PLAN.name)
    return render_train(
        plan, name="r", model_path="/m/Q", dataset="d", dataset_dir="/d", output_dir="/o",
        weight_path=str(tree), weight_format=weight_format,
    )  # fmt: skip


@pytest.mark.parametrize(("name", "weight_format"), [("cpu-weights", "int4"), ("q-INT4", None)])
def test_an_int8_tree_trained_as_int4_is_refused(tmp_path, name, weight_format):
    tree = write_tree(tmp_path / name, numa=1, kernel="INT8")
    with pytest.raises(
        RenderError, match=r"holds INT8 \.kt files .* trains them as int4 .* --weight-format int8"
    ):
        _train(tree, weight_format)


def test_an_int4_tree_as_int4_and_a_tree_elsewhere_still_render(tmp_path):
    rendered = _train(write_tree(tmp_path / "cpu-weights", numa=1, kernel="INT4"), "int4")
    assert "kt_backend: AMXINT4" in rendered.files["r.yaml"][0]
    assert _train(tmp_path / "not-here-INT4")  # rendering for another host: not judged


def test_cli_refuses_in_one_line_and_writes_nothing(tmp_path):
    tree = write_tree(tmp_path / "cpu-weights", numa=1, kernel="INT8")
    r = subprocess.run(
        [sys.executable, "-m", "ktinfra", "render", "train", "--name", "r", "--plan", str(PLAN),
         "--model-path", "/m/Q", "--dataset", "d", "--dataset-dir", "/d", "--output-dir", "/o",
         "--weight-path", str(tree), "--weight-format", "int4", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(f"error: kt_weight_path {tree} holds INT8 .kt files")
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
