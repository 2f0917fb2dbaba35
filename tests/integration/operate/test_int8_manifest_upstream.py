"""`ktinfra weights manifest` against kt-kernel's own validator: kt_kernel/sft/weight_manifest.py of the
kt-kernel 0.7.2 wheel in the serving venv, loaded by file (like upstream's prepare_ephemeral_int8.py loads
sft/ephemeral.py), so its native extension, which needs torch 2.9.1, is not imported. This is the check
kt-kernel's SFT wrapper runs before it loads INT8 experts (sft/wrapper.py, kt_expert_weight_format int8).
The tree is a stand-in for convert_cpu_weights.py's output on an AMX CPU (tests/unit/int8_tree.py), sized
from the tiny model's config.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.int8_weights import expert_shape

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit"))
from int8_tree import write_tree  # noqa: E402

VALIDATE = """
import importlib.util, json, sys, types
from pathlib import Path
found = importlib.util.find_spec("kt_kernel")  # the package's location; its __init__ is not run
sft = Path(found.submodule_search_locations[0]) / "sft"
package = types.ModuleType("kt_sft"); package.__path__ = [str(sft)]; sys.modules["kt_sft"] = package
for name in ("backend", "weight_manifest"):
    spec = importlib.util.spec_from_file_location(f"kt_sft.{name}", sft / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
args = json.loads(sys.argv[1])
try:
    result = module.validate_persistent_int8_weights(args.pop("root"), verify_hashes=True, **args)
    print(json.dumps({"ok": True, "files": result.file_count, "bytes": result.size_bytes,
                      "layout": result.layout, "schema": result.schema_version, "from": str(sft)}))
except Exception as exc:
    print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
"""


@pytest.fixture
def tree(tmp_path, tiny_model):
    shape = expert_shape(tiny_model)
    root = write_tree(
        tmp_path / "tiny-INT8", layers=shape.moe_layers, experts=shape.expert_num, hidden=shape.hidden_size,
        inter=shape.intermediate_size, numa=2,
    )  # fmt: skip
    args = {"root": str(root), "layer_indices": list(shape.moe_layers), "numa_count": 2,
            "expert_num": shape.expert_num, "hidden_size": shape.hidden_size,
            "intermediate_size": shape.intermediate_size}  # fmt: skip
    return root, args


def upstream_validates(serve_python: Path, args: dict) -> dict:
    proc = subprocess.run([serve_python, "-c", VALIDATE, json.dumps(args)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def manifest(root: Path, model: Path):
    return CliRunner().invoke(app, ["weights", "manifest", str(root), "--model-path", str(model), "--json"])


def test_kt_kernel_accepts_the_manifest_ktinfra_writes(tree, tiny_model, serve_python):
    root, args = tree
    res = manifest(root, tiny_model)
    assert res.exit_code == 0, res.output
    verdict = upstream_validates(serve_python, args)
    assert verdict["ok"], verdict
    assert "venv-serve" in verdict["from"] and verdict["from"].endswith("kt_kernel/sft")
    assert (verdict["schema"], verdict["layout"]) == (2, "kt-int8-n32-k64-vnni-v1")
    assert (verdict["files"], verdict["bytes"]) == (
        json.loads(res.stdout)["files"],
        json.loads(res.stdout)["bytes"],
    )


def test_kt_kernel_refuses_the_tree_without_it_or_with_a_marker_inside(tree, tiny_model, serve_python):
    """Why the conversion ends with the manifest, and why its done marker is the manifest itself."""
    root, args = tree
    verdict = upstream_validates(serve_python, args)
    assert not verdict["ok"] and "requires exactly one manifest" in verdict["error"], verdict
    assert manifest(root, tiny_model).exit_code == 0
    (root / ".ktinfra-convert-done").touch()
    verdict = upstream_validates(serve_python, args)
    assert not verdict["ok"] and "root entries differ from its manifest" in verdict["error"], verdict


def test_kt_kernel_sees_a_file_changed_after_the_manifest(tree, tiny_model, serve_python):
    root, args = tree
    assert manifest(root, tiny_model).exit_code == 0
    victim = next(root.rglob("*quant_.kt"))
    victim.write_bytes(bytes(victim.stat().st_size))
    verdict = upstream_validates(serve_python, args)
    assert not verdict["ok"] and "SHA256 mismatch" in verdict["error"], verdict
