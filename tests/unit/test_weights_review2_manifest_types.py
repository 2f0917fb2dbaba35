"""`ktinfra weights check` against numbers kt-kernel's validator (kt_kernel/sft/weight_manifest.py) takes
only as JSON integers: schema_version, the total `bytes` and each file's size_bytes. A manifest rewritten by
a tool that writes 53248.0 for 53248 is refused by kt-kernel when training starts ("INT8 manifest bytes must
be a positive integer"); before, `check` compared with == and said it matched."""

from __future__ import annotations

import pytest
from int8_tree import moe_model, write_tree
from test_int8_weights import check_edited_manifest

from ktinfra import int8_weights


def _float_bytes(manifest):
    manifest["bytes"] = float(manifest["bytes"])


def _float_size(manifest):
    entry = manifest["layers"][0]["files"][0]
    entry["size_bytes"] = float(entry["size_bytes"])


def _float_schema(manifest):
    manifest["schema_version"] = 2.0


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_float_bytes, "does not describe the files there now (bytes 53248.0, the tree gives 53248)"),
        (_float_size, "does not describe the files there now (layer 0: other files or sizes)"),
        (_float_schema, "is not a schema-2 INT8 weight manifest"),
    ],
)
def test_a_size_written_as_a_float_is_refused_as_kt_kernel_refuses_it(tmp_path, edit, message):
    res = check_edited_manifest(tmp_path, moe_model(tmp_path / "m"), edit)
    assert res.exit_code == 1 and res.stdout == "", res.output
    assert message in res.stderr, res.stderr


def test_the_same_manifest_with_integers_still_matches(tmp_path):
    """The control: the manifest as written, read back through json, passes."""
    model = moe_model(tmp_path / "m")
    root = write_tree(tmp_path / "m-INT8", numa=2)
    written = int8_weights.write_manifest(root, model)
    assert int8_weights.check_manifest(root, model) == written
