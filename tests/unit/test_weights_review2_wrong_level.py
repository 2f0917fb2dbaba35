"""`ktinfra weights manifest|check` given a folder one level off the converted tree: the folder holding the
trees (/data/cpu-weights) or one of the tree's _layer_N folders. Before, the error ended "remove the
directory and convert again": the one advice that would delete the conversion, or every tree beside it.
A tree with another converter's files (merged shards) keeps that advice."""

from __future__ import annotations

import pytest
from int8_tree import moe_model, write_tree
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.int8_weights import MANIFEST_NAME


def cli(*args):
    return CliRunner().invoke(app, ["weights", *map(str, args)])


@pytest.mark.parametrize("command", ["manifest", "check"])
def test_the_folder_holding_the_trees_points_at_the_tree(tmp_path, command):
    model = moe_model(tmp_path / "models" / "m")
    weights = tmp_path / "cpu-weights"
    tree = write_tree(weights / "m-INT8")
    (weights / "notes.txt").write_text("converted on gpu1")
    res = cli(command, weights, "--model-path", model)
    assert res.exit_code == 1, res.output
    said = f"{weights} is not a converted tree but holds 1 (m-INT8): give the tree itself, {tree}"
    assert said in res.stderr, res.stderr
    assert "remove the directory" not in res.stderr
    assert not (weights / MANIFEST_NAME).exists() and tree.exists()


def test_a_layer_folder_points_at_its_tree(tmp_path):
    model = moe_model(tmp_path / "m")
    tree = write_tree(tmp_path / "m-INT8", numa=2)
    res = cli("manifest", tree / "_layer_1", "--model-path", model)
    assert res.exit_code == 1, res.output
    assert f"{tree / '_layer_1'} is one layer's folder of a converted tree: give the tree itself, {tree}" in (
        res.stderr
    )
    assert "remove the directory" not in res.stderr


def test_the_tree_itself_still_gets_its_manifest(tmp_path):
    """The control: given the tree, the same files make a manifest."""
    model = moe_model(tmp_path / "m")
    tree = write_tree(tmp_path / "cpu-weights" / "m-INT8")
    assert cli("manifest", tree, "--model-path", model).exit_code == 0
    assert cli("check", tree, "--model-path", model).exit_code == 0
