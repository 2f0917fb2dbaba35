"""`weights check --hashes`: a file replaced after the manifest was written, by one of the same size (another
conversion into the tree, of another checkpoint of the same architecture, cut off half way), keeps every size
the manifest records. kt-kernel 0.7.2's pretrained-artifact load hashes every file (sft/artifacts.py,
verify_hashes on rank 0) and refuses such a tree; before, `weights check` had no way to see it."""

from __future__ import annotations

import os

from int8_tree import moe_model, write_tree
from typer.testing import CliRunner

from ktinfra.cli import app


def cli(*args):
    return CliRunner().invoke(app, ["weights", *map(str, args)])


def test_a_file_replaced_by_one_of_the_same_size_is_found_with_hashes(tmp_path):
    model = moe_model(tmp_path / "m")
    root = write_tree(tmp_path / "m-INT8")
    assert cli("manifest", root, "--model-path", model).exit_code == 0
    assert cli("check", root, "--model-path", model, "--hashes").exit_code == 0
    replaced = sorted(root.rglob("*.kt"))[5]
    replaced.write_bytes(os.urandom(replaced.stat().st_size))
    res = cli("check", root, "--model-path", model, "--hashes")
    assert res.exit_code == 1, res.output
    rel = replaced.relative_to(root).as_posix()
    assert res.stderr.startswith(f"error: {rel}: its sha256 is not the one") and "--hashes" not in res.stdout
    assert cli("check", root, "--model-path", model).exit_code == 0  # sizes only, as kt-kernel trains
