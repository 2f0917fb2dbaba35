"""`ktinfra weights manifest` given one _layer_N/_numa_M folder of a converted tree (a level below the
_layer_N folder review2 covered) ended its error with "remove the directory and convert again": advice that
deletes part of the conversion. It now points at the tree, as for a _layer_N folder, and changes nothing."""

from __future__ import annotations

import pytest
from int8_tree import moe_model, write_tree
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.int8_weights import MANIFEST_NAME


@pytest.mark.parametrize("command", ["manifest", "check"])
def test_a_numa_folder_points_at_its_tree(tmp_path, command):
    model = moe_model(tmp_path / "m")
    tree = write_tree(tmp_path / "m-INT8", numa=2)
    folder = tree / "_layer_1" / "_numa_1"
    before = sorted(p.name for p in folder.iterdir())
    res = CliRunner().invoke(app, ["weights", command, str(folder), "--model-path", str(model)])
    assert res.exit_code == 1, res.output
    said = f"{folder} is one NUMA pool's folder of a converted tree: give the tree itself, {tree}"
    assert said in res.stderr, res.stderr
    assert "remove the directory" not in res.stderr
    assert sorted(p.name for p in folder.iterdir()) == before and not (folder / MANIFEST_NAME).exists()


def test_a_folder_of_that_name_outside_a_tree_keeps_the_general_error(tmp_path):
    """Only a _numa_M folder inside a _layer_N folder, holding .kt files, is taken for a tree's pool."""
    model = moe_model(tmp_path / "m")
    folder = tmp_path / "_numa_0"
    folder.mkdir()
    (folder / "notes.txt").write_text("x")
    res = CliRunner().invoke(app, ["weights", "manifest", str(folder), "--model-path", str(model)])
    assert res.exit_code == 1 and "NUMA pool's folder" not in res.stderr, res.stderr
