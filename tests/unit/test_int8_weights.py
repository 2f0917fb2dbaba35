"""`ktinfra weights manifest|check`: the kt-weight-manifest.json kt-kernel 0.7.2 requires beside INT8 experts
it trains from. The manifest's validation by kt-kernel's own code runs in the operate stage
(tests/integration/operate/test_int8_manifest_upstream.py) and on the AMX host (docs/results)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from int8_tree import TINY, moe_model, write_tree
from typer.testing import CliRunner

from ktinfra import int8_weights
from ktinfra.cli import app
from ktinfra.int8_weights import MANIFEST_NAME, WeightsError


def cli(*args):
    return CliRunner().invoke(app, ["weights", *map(str, args)])


@pytest.fixture
def model(tmp_path):
    return moe_model(tmp_path / "m")


def test_manifest_lists_every_file_with_size_and_hash(tmp_path, model):
    root = write_tree(tmp_path / "m-INT8", numa=2)
    res = cli("manifest", root, "--model-path", model, "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary == {"ok": True, "manifest": str(root / MANIFEST_NAME), "layers": 2, "threadpool_count": 2,
                       "files": 2 * 2 * 3 * 4 * 2, "bytes": summary["bytes"]}  # fmt: skip
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    keys = ("schema_version", "state", "expert_weight_format", "layout", "backend")
    assert {k: manifest[k] for k in keys} == {
        "schema_version": 2, "state": "ready", "expert_weight_format": "int8",
        "layout": "kt-int8-n32-k64-vnni-v1", "backend": "INT8",
    }  # fmt: skip
    assert (manifest["expert_num"], manifest["hidden_size"], manifest["intermediate_size"]) == (4, 64, 32)
    assert [layer["index"] for layer in manifest["layers"]] == [0, 1]
    entry = manifest["layers"][1]["files"][0]
    path = root / entry["path"]
    assert entry["path"].startswith("_layer_1/_numa_0/INT8_")
    assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert entry["size_bytes"] == path.stat().st_size
    assert manifest["bytes"] == sum(p.stat().st_size for p in root.rglob("*.kt")) == summary["bytes"]
    # nothing but the layers and the manifest: kt-kernel refuses any other entry there
    assert sorted(p.name for p in root.iterdir()) == ["_layer_0", "_layer_1", MANIFEST_NAME]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "m-INT8"]
    assert cli("check", root, "--model-path", model).exit_code == 0


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda r: (r / "model-00001-of-00001.safetensors").write_bytes(b"x"),
            "model-00001-of-00001.safetensors",
        ),
        (lambda r: (r / ".ktinfra-convert-done").touch(), ".ktinfra-convert-done"),
        (lambda r: next(r.rglob("*.kt")).unlink(), "lacks 1 of its .kt files"),
        (lambda r: next(r.rglob("*quant_.kt")).write_bytes(b"short"), "5 bytes for expert"),
        (lambda r: (r / "_layer_1" / "_numa_0" / "notes.txt").write_text("x"), "notes.txt is not an INT8"),
        (
            lambda r: __import__("shutil").rmtree(r / "_layer_1"),
            "has expert layers 0, the model's config.json has 0-1",
        ),
    ],
)
def test_a_tree_kt_kernel_would_refuse_gets_no_manifest(tmp_path, model, damage, message):
    root = write_tree(tmp_path / "m-INT8")
    damage(root)
    res = cli("manifest", root, "--model-path", model)
    assert res.exit_code == 1 and message in res.stderr, res.output
    assert not (root / MANIFEST_NAME).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _rename(path, name):
    path.rename(path.with_name(name))


def _link_out(root, folder):
    """Move the folder out of the tree and leave a symlink to it in its place."""
    path = root / folder
    moved = path.rename(root.parent / f"moved{path.name}")
    path.symlink_to(moved, target_is_directory=True)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda r: _rename(r / "_layer_0", "_layer_00"), "holds _layer_00"),
        (lambda r: _rename(r / "_layer_1" / "_numa_0", "_numa_00"), "has ['_numa_00']"),
        (
            lambda r: (shutil.rmtree(r / "_layer_1" / "_numa_0"), (r / "_layer_1" / "_numa_0").touch()),
            "must hold only the folders _numa_0 .. _numa_N-1",
        ),
        (lambda r: _link_out(r, "_layer_1"), "holds _layer_1"),
        (lambda r: _link_out(r, "_layer_1/_numa_0"), "(no files, no symlinks), has ['_numa_0']"),
        (
            lambda r: _rename(
                next((r / "_layer_1" / "_numa_0").glob("INT8_gate_1_*quant_.kt")),
                "INT8_gate_01_2048Byte_quant_.kt",
            ),
            "INT8_gate_01_2048Byte_quant_.kt is not an INT8 .kt weight file",
        ),
    ],
)
def test_folders_kt_kernel_does_not_read_get_no_manifest(tmp_path, model, damage, message):
    """kt-kernel reads _layer_{N}/_numa_{M} by those exact names and refuses symlinks in the tree (its
    weight_manifest.py). Before: _layer_00, _numa_00 or a file named _numa_0 ended in a FileNotFoundError /
    NotADirectoryError traceback; a symlinked _layer_N or _numa_M folder, and an expert numbered 01, got a
    manifest kt-kernel then refused (or, for the expert, never found)."""
    root = write_tree(tmp_path / "m-INT8")
    damage(root)
    res = cli("manifest", root, "--model-path", model)
    assert res.exit_code == 1 and message in res.stderr, res.output
    assert isinstance(res.exception, SystemExit), res.exception
    assert not (root / MANIFEST_NAME).exists()


def test_a_symlinked_root_is_refused_with_its_target(tmp_path, model):
    """kt-kernel: "persistent INT8 weight root must not be a symlink"; before, the manifest was written."""
    real = write_tree(tmp_path / "m-INT8")
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    res = cli("manifest", tmp_path / "link", "--model-path", model)
    assert res.exit_code == 1 and "is a symlink" in res.stderr and f"({real})" in res.stderr, res.output
    assert not (real / MANIFEST_NAME).exists()
    assert cli("manifest", real, "--model-path", model).exit_code == 0


def test_merged_output_is_refused_with_the_fix(tmp_path, model):
    """convert_cpu_weights.py's default (merged shards, ktinfra before this) cannot be trained from."""
    root = tmp_path / "m-INT8"
    root.mkdir()
    (root / "model-00001-of-00002.safetensors").write_bytes(b"x")
    (root / "model.safetensors.index.json").write_text("{}")
    res = cli("manifest", root, "--model-path", model, "--json")
    assert res.exit_code == 1 and res.stdout == ""  # bad input: stderr only, --json or not
    error = res.stderr
    assert "--no-merge-safetensor" in error and "remove the directory and convert again" in error


def test_layers_follow_the_models_dense_layers(tmp_path):
    """DeepSeek's first_k_dense_replace and Qwen's mlp_only_layers / decoder_sparse_step have no experts."""
    deepseek = moe_model(tmp_path / "ds", num_experts=None, n_routed_experts=4, num_hidden_layers=4,
                         first_k_dense_replace=1)  # fmt: skip
    assert int8_weights.expert_shape(deepseek).moe_layers == (1, 2, 3)
    qwen = moe_model(tmp_path / "qw", num_hidden_layers=6, decoder_sparse_step=2, mlp_only_layers=[3])
    assert int8_weights.expert_shape(qwen).moe_layers == (1, 5)
    root = write_tree(tmp_path / "ds-INT8", layers=(1, 2, 3))
    assert cli("manifest", root, "--model-path", deepseek).exit_code == 0
    layers = [layer["index"] for layer in json.loads((root / MANIFEST_NAME).read_text())["layers"]]
    assert layers == [1, 2, 3]


def test_a_tree_of_another_model_is_refused(tmp_path, model):
    root = write_tree(tmp_path / "m-INT8", hidden=128)
    res = cli("manifest", root, "--model-path", model)
    assert res.exit_code == 1 and "converted from another model or cut off?" in res.stderr


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"moe_intermediate_size": None}, "config.json has no moe_intermediate_size"),
        ({"hidden_size": "64"}, "config.json hidden_size must be a positive integer, got '64'"),
        ({"num_experts": None}, "has no n_routed_experts or num_experts or num_local_experts"),
    ],
)
def test_a_config_without_expert_sizes_is_refused(tmp_path, config, message):
    root = write_tree(tmp_path / "m-INT8")
    res = cli("manifest", root, "--model-path", moe_model(tmp_path / "m", **config))
    assert res.exit_code == 1 and message in res.stderr
    assert not (root / MANIFEST_NAME).exists()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"text_config": [1]}, "config.json text_config must be a JSON object, got [1]"),
        ({"first_k_dense_replace": "1"}, "config.json first_k_dense_replace must be a whole number, got '1'"),
        ({"decoder_sparse_step": "2"}, "config.json decoder_sparse_step must be a whole number, got '2'"),
        ({"moe_layer_freq": 1.5}, "config.json moe_layer_freq must be a whole number, got 1.5"),
        ({"mlp_only_layers": 5}, "config.json mlp_only_layers must be a list of layer numbers, got 5"),
        ({"mlp_only_layers": [[1]]}, "config.json mlp_only_layers must be a list of layer numbers"),
    ],
)
def test_a_config_with_odd_layer_fields_is_named_not_a_crash(tmp_path, config, message):
    """Before: AttributeError / TypeError tracebacks ('>=' not supported between 'int' and 'str', unhashable
    type: 'list', ...) instead of an error line naming the field."""
    root = write_tree(tmp_path / "m-INT8")
    res = cli("manifest", root, "--model-path", moe_model(tmp_path / "m", **config))
    assert res.exit_code == 1 and message in res.stderr, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert not (root / MANIFEST_NAME).exists()
    # null is what the field's absence means
    nulls = {"first_k_dense_replace": None, "decoder_sparse_step": None, "mlp_only_layers": None}
    (tmp_path / "m" / "config.json").write_text(json.dumps({"text_config": None} | TINY | nulls))
    assert int8_weights.expert_shape(tmp_path / "m").moe_layers == (0, 1)


def test_missing_inputs_are_refused(tmp_path, model):
    res = cli("manifest", tmp_path / "absent", "--model-path", model)
    assert res.exit_code == 1 and "is not a directory" in res.stderr
    res = cli("manifest", write_tree(tmp_path / "t"), "--model-path", tmp_path / "nomodel")
    assert res.exit_code == 1 and "cannot read" in res.stderr and "config.json" in res.stderr


def test_check_sees_a_tree_changed_after_its_manifest(tmp_path, model):
    root = write_tree(tmp_path / "m-INT8")
    assert cli("manifest", root, "--model-path", model).exit_code == 0
    res = cli("check", root, "--model-path", model, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["files"] == 2 * 3 * 4 * 2
    next(root.rglob("*scale_.kt")).write_bytes(b"")
    res = cli("check", root, "--model-path", model)
    assert res.exit_code == 1 and "0 bytes for expert" in res.stderr
    fresh = write_tree(tmp_path / "other")
    res = cli("check", fresh, "--model-path", model)
    assert res.exit_code == 1 and f"has no {MANIFEST_NAME}" in res.stderr


def test_check_sees_a_manifest_of_other_files(tmp_path, model):
    root = write_tree(tmp_path / "m-INT8")
    assert cli("manifest", root, "--model-path", model).exit_code == 0
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    manifest["layers"][0]["files"][0]["size_bytes"] += 1
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))
    res = cli("check", root, "--model-path", model)
    assert res.exit_code == 1 and "does not describe the files there now" in res.stderr


def check_edited_manifest(tmp_path, model, edit):
    """`weights check --json` of a tree whose manifest, as `weights manifest` wrote it, `edit` changed."""
    root = write_tree(tmp_path / "m-INT8")
    assert cli("manifest", root, "--model-path", model).exit_code == 0
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    edit(manifest)
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))
    return cli("check", root, "--model-path", model, "--json")


def _edit(**changes):
    """A change to a manifest: top-level keys, or `layer0` / `file0` for the first layer / file."""

    def edit(manifest):
        for key, value in changes.items():
            where = {"layer0": manifest["layers"][0], "file0": manifest["layers"][0]["files"][0]}.get(key)
            if where is None:
                manifest.pop(key) if value is _edit else manifest.__setitem__(key, value)
            else:
                where.update(value)

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_edit(bytes=5), "bytes 5, the tree gives 53248"),
        (_edit(bytes=_edit), "bytes None, the tree gives 53248"),
        (_edit(bytes="53248"), "bytes '53248', the tree gives 53248"),
        (_edit(layout="kt-int8-other"), "layout 'kt-int8-other'"),
        (_edit(state="writing"), "state 'writing'"),
        (_edit(expert_weight_format="int4"), "expert_weight_format 'int4'"),
        (_edit(backend="AMXINT8"), "backend 'AMXINT8'"),
        (_edit(layer0={"index": 7}), "layers 1,7, the tree has 0-1"),
        (_edit(layer0={"index": True}), "layers [1, True], the tree has 0-1"),
        (_edit(layer0={"bytes": 1}), "layer 0: bytes 1, the tree gives 26624"),
        (_edit(layer0={"state": "partial"}), "layer 0: state 'partial'"),
        (_edit(layer0={"numa_count": 2}), "layer 0: numa_count 2, the tree gives 1"),
        (_edit(file0={"sha256": "abc"}), "a file's sha256 is 'abc', not 64 lowercase hex digits"),
        (_edit(file0={"sha256": "A" * 64}), "not 64 lowercase hex digits"),
        (_edit(layers=[]), "layers none, the tree has 0-1"),
        (_edit(layers=[[1]]), "its layers are not lists of files"),
    ],
)
def test_check_refuses_a_manifest_kt_kernel_would_refuse(tmp_path, model, edit, message):
    """kt-kernel's validator compares these with the tree (weight_manifest.py). Before, `check` compared only
    the file list and four sizes: it said "matches" (exit 0, with the manifest's own byte count, even "x")
    for all of these, and a manifest without `bytes` ended in a KeyError traceback."""
    res = check_edited_manifest(tmp_path, model, edit)
    assert res.exit_code == 1 and res.stdout == "", res.output
    assert "does not describe the files there now" in res.stderr and message in res.stderr, res.stderr


def test_check_takes_a_manifest_in_any_order(tmp_path, model):
    """Layer and file order, and backend 'auto', are the same manifest to kt-kernel."""
    root = write_tree(tmp_path / "m-INT8", numa=2)
    assert cli("manifest", root, "--model-path", model).exit_code == 0
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    manifest["layers"].reverse()
    manifest["layers"][0]["files"].reverse()
    manifest["backend"] = "auto"
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))
    res = cli("check", root, "--model-path", model, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["bytes"] == manifest["bytes"]


@pytest.mark.parametrize("where", ["sha256_of", "os.fsync"])
def test_a_file_that_cannot_be_read_or_written_is_an_error_line(tmp_path, model, monkeypatch, where):
    """Before: a PermissionError traceback (a .kt file of another user, a parent directory the manifest's
    temporary file cannot be made in). Tests run as root, where chmod stops nothing: the OS call fails."""
    root = write_tree(tmp_path / "m-INT8")

    def refuse(*args):
        raise PermissionError(13, "Permission denied", str(root / "_layer_0"))

    monkeypatch.setattr(
        int8_weights if where == "sha256_of" else int8_weights.os, where.split(".")[-1], refuse
    )
    res = cli("manifest", root, "--model-path", model, "--json")
    assert res.exit_code == 1 and res.stdout == "", res.output
    assert res.stderr == f"error: {root / '_layer_0'}: Permission denied\n"
    assert sorted(p.name for p in root.iterdir()) == ["_layer_0", "_layer_1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "m-INT8"]  # no temporary file left


def test_write_replaces_an_old_manifest_atomically(tmp_path, model):
    root = write_tree(tmp_path / "m-INT8")
    (root / MANIFEST_NAME).write_text("{old")
    with pytest.raises(WeightsError):
        int8_weights.check_manifest(root, model)
    int8_weights.write_manifest(root, model)
    assert json.loads((root / MANIFEST_NAME).read_text())["schema_version"] == 2


def test_a_model_without_moe_layers_is_named_not_a_crash(tmp_path):
    """Before: an empty tree of such a model matched its (empty) layer list and failed with IndexError."""
    model = moe_model(tmp_path / "dense", num_hidden_layers=1, first_k_dense_replace=1)
    (tmp_path / "t").mkdir()
    res = cli("manifest", tmp_path / "t", "--model-path", model)
    assert res.exit_code == 1 and "has no MoE layer" in res.stderr, res.output


def test_check_of_a_missing_tree_says_so(tmp_path, model):
    """Before: "has no kt-weight-manifest.json: write it with `ktinfra weights manifest`" for a typo."""
    with pytest.raises(int8_weights.WeightsError, match="does not exist$"):
        int8_weights.check_manifest(tmp_path / "nope", model)
    (tmp_path / "file").write_text("x")
    with pytest.raises(int8_weights.WeightsError, match="is not a directory$"):
        int8_weights.check_manifest(tmp_path / "file", model)


def test_a_manifest_kt_kernel_would_not_load_is_refused_where_it_is_read(tmp_path, model):
    """kt-kernel loads a tree only with exactly one manifest, a regular file (sft/weight_manifest.py). Before:
    a symlinked manifest was read through and said to match; the schema-1 name beside it was not seen by
    `render train`, which read only the schema-2 one."""
    root = write_tree(tmp_path / "m-INT8")
    assert cli("manifest", root, "--model-path", model).exit_code == 0
    kept = tmp_path / "kept.json"
    (root / MANIFEST_NAME).rename(kept)
    (root / MANIFEST_NAME).symlink_to(kept)
    res = cli("check", root, "--model-path", model)
    assert res.exit_code == 1 and f"{root / MANIFEST_NAME} is a symlink" in res.stderr, res.output
    with pytest.raises(WeightsError, match="is a symlink"):
        int8_weights.read_manifest(root)

    (root / MANIFEST_NAME).unlink()
    (root / MANIFEST_NAME).mkdir()
    with pytest.raises(WeightsError, match="is not a file"):
        int8_weights.read_manifest(root)

    (root / MANIFEST_NAME).rmdir()
    kept.rename(root / MANIFEST_NAME)
    assert int8_weights.read_manifest(root)["threadpool_count"] == 1
    (root / int8_weights.LEGACY_MANIFEST_NAME).write_text("{}")
    with pytest.raises(WeightsError, match="holds both kt-weight-manifest.json and kt-kernel's older"):
        int8_weights.read_manifest(root)


@pytest.mark.parametrize(("first", "then"), [(4, 2), (2, 4)])
def test_two_conversions_with_different_pool_counts_in_one_folder_are_named(tmp_path, model, first, then):
    """convert_cpu_weights.py writes into --output as it goes: converting again with another
    --threadpool-count leaves the earlier split beside the new one. Before, the message blamed another
    model or a cut-off conversion ("converted from another model or cut off?")."""
    root = write_tree(write_tree(tmp_path / "m-INT8", numa=first), numa=then)
    with pytest.raises(WeightsError) as refused:
        int8_weights.build_manifest(root, model)
    message = str(refused.value)
    assert f"is split over {min(first, then)} NUMA pools, the tree's _numa_ folders over 4" in message
    assert f"two conversions with different --threadpool-count wrote into {root}" in message
    result = cli("manifest", root, "--model-path", model)
    assert result.exit_code == 1 and "two conversions with different --threadpool-count" in result.output
    assert not (root / MANIFEST_NAME).exists()
