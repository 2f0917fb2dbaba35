"""A converted tree that holds kt-kernel's schema-1 kt-ephemeral-manifest.json: kt-kernel 0.7.2
(sft/weight_manifest.py) loads it as it is and wants exactly one manifest, so the way to a schema-2 manifest
is to remove the old one, never the converted files. Before, `weights manifest` said "remove the directory
and convert again" and `weights check` sent the user to `weights manifest`."""

from __future__ import annotations

from int8_tree import moe_model, write_tree
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.int8_weights import LEGACY_MANIFEST_NAME, MANIFEST_NAME


def test_a_schema_1_manifest_is_named_and_the_tree_is_kept(tmp_path):
    model = moe_model(tmp_path / "m")
    root = write_tree(tmp_path / "m-INT8")
    (root / LEGACY_MANIFEST_NAME).write_text('{"schema_version": 1}')
    for action in ("manifest", "check"):
        res = CliRunner().invoke(app, ["weights", action, str(root), "--model-path", str(model)])
        assert res.exit_code == 1, res.output
        assert f"{root} holds kt-kernel's schema-1 {LEGACY_MANIFEST_NAME}" in res.stderr, res.stderr
        assert f"remove {root / LEGACY_MANIFEST_NAME}" in res.stderr
        assert "convert again" not in res.stderr
    assert not (root / MANIFEST_NAME).exists()
    assert (root / "_layer_1" / "_numa_0").is_dir()
