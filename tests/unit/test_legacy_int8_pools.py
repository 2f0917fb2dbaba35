"""A converted CPU-expert tree is loaded only with the NUMA pools it was converted for.

Upstream facts (kvcache-ai/ktransformers at v0.4.4 = 0bce173e3b9306c181a3cd8f9ef3f8f944a4311e, the legacy
kt-0.4-autodl stack's kt-kernel; v0.7.0 has the same code): operators/moe-tp.hpp:54,117 gives each of the
server's --kt-threadpool-count pools intermediate_size / pools of every expert; operators/amx/moe.hpp:178
reads pool i from _layer_N/_numa_i and :101-119 opens INT8_{up,gate,down}_E_<bytes>Byte_{quant,scale}_.kt
with <bytes> from that share, printing "no such file" without raising when it is not there (a tree split
over more pools loads as nothing); :184-187 raises "Path not found" for a pool folder it lacks. A merged
tree (convert_cpu_weights.py without --no-merge-safetensor, python/utils/loader.py:171-200) carries the
split in its keys blk.L.ffn_{up,gate,down}_exps.E.numa.M.{weight,scale}.
"""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import subprocess
import sys
from pathlib import Path
from unittest.mock import ANY

import pytest
from int8_tree import CONVERTER, moe_model, write_tree
from safetensors_file import write_safetensors
from test_render_support import load_fixture_plan

from ktinfra.int8_weights import MANIFEST_NAME
from ktinfra.render import RenderError, render_serve

MODEL = "/models/Qwen3-30B-A3B"


@pytest.fixture
def legacy():
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    assert plan["stack"] == "kt-0.4-autodl" and plan["serve"]["kt_method"] == "AMXINT8"
    assert plan["serve"]["kt_threadpool_count"] == 2
    return plan


def _merged(root, pools: int, kernel: str = "INT8", hidden: int = 64, inter: int = 32):
    """convert_cpu_weights.py's default (merged) output: model.safetensors with the blk.* expert keys, shaped
    as the upstream v0.7.0 converter writes them (2026-11-29 H200 run: I8 weights of one byte per value for
    INT8, half a byte for INT4; one F32 scale per row of the pool's share)."""
    root.mkdir(parents=True)
    part, per_value = inter // pools, {"INT8": 1, "INT4": 0.5}[kernel]
    shapes = {
        ("up", "weight"): int(hidden * part * per_value), ("gate", "weight"): int(hidden * part * per_value),
        ("down", "weight"): int(hidden * part * per_value), ("up", "scale"): part, ("gate", "scale"): part,
        ("down", "scale"): hidden,
    }  # fmt: skip
    header, offset = {}, 0
    for numa in range(pools):
        for (proj, kind), size in shapes.items():
            dtype, width = ("I8", 1) if kind == "weight" else ("F32", 4)
            header[f"blk.0.ffn_{proj}_exps.0.numa.{numa}.{kind}"] = {
                "dtype": dtype,
                "shape": [size],
                "data_offsets": [offset, offset + size * width],
            }
            offset += size * width
    raw = json.dumps(header).encode()
    (root / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return root


def _serve(plan, weights):
    return render_serve(plan, name="q", model_path=MODEL, weight_path=str(weights)).info["argv"]


def test_a_layer_tree_split_over_other_pools_than_the_plans_is_refused(legacy, tmp_path):
    """Before, a tree converted over 1 pool rendered for the seed 002 plan's 2 pools (exit 0): kt-kernel then
    stops at "Path not found: …/_numa_1"; one over 2 pools under a 1-pool plan loaded without its files."""
    one = write_tree(tmp_path / "Qwen3-30B-A3B-INT8-1", numa=1)
    with pytest.raises(
        RenderError, match="split over 1 NUMA pool, the plan's serve.kt_threadpool_count is 2"
    ):
        _serve(legacy, one)
    two = write_tree(tmp_path / "Qwen3-30B-A3B-INT8", numa=2)
    argv = _serve(legacy, two)
    assert argv[argv.index("--kt-threadpool-count") + 1] == "2"
    legacy["serve"]["kt_threadpool_count"] = 1
    with pytest.raises(
        RenderError, match="split over 2 NUMA pools, the plan's serve.kt_threadpool_count is 1"
    ):
        _serve(legacy, two)
    assert _serve(legacy, one)


def test_the_plans_own_weight_path_is_checked_too(legacy, tmp_path):
    legacy["serve"]["kt_weight_path"] = str(write_tree(tmp_path / "w-INT8", numa=1))
    with pytest.raises(RenderError, match="convert it again with --threadpool-count 2"):
        render_serve(legacy, name="q", model_path=MODEL)


def test_a_merged_tree_is_judged_by_its_numa_keys(legacy, tmp_path):
    with pytest.raises(RenderError, match="split over 1 NUMA pool"):
        _serve(legacy, _merged(tmp_path / "one-INT8", 1))
    assert _serve(legacy, _merged(tmp_path / "two-INT8", 2))


def test_what_tells_no_split_is_not_judged(legacy, tmp_path):
    """Empty pool folders and a tree not on this machine (rendering for another host) are not judged; an
    AMXINT4 tree is judged as an AMXINT8 one (same folders, INT4_ files)."""
    (tmp_path / "empty-INT8" / "_layer_0" / "_numa_0").mkdir(parents=True)
    assert _serve(legacy, tmp_path / "empty-INT8")
    assert _serve(legacy, tmp_path / "not-here-INT8")
    legacy["serve"]["kt_method"] = "AMXINT4"
    with pytest.raises(RenderError, match="split over 1 NUMA pool"):
        _serve(legacy, write_tree(tmp_path / "w-INT4", numa=1, kernel="INT4"))


@pytest.mark.parametrize("layout", ["merged", "layers"])
def test_a_converted_tree_under_a_native_method_is_refused_by_its_files(legacy, tmp_path, layout):
    """Before, a merged tree (no manifest, a name without INT8/INT4) passed under a BF16 plan, exit 0: the
    server reads the model's own expert tensors from it and dies loading."""
    legacy["serve"]["kt_method"] = "BF16"
    folder = tmp_path / "cpu-weights"
    _merged(folder, 2) if layout == "merged" else write_tree(folder, numa=2)
    holds = "INT8 weights"
    with pytest.raises(RenderError, match=re.escape(f"holds {holds} (by its files)")):
        _serve(legacy, folder)
    legacy["serve"]["kt_method"] = "LLAMAFILE"
    with pytest.raises(RenderError, match=re.escape(f"holds {holds} (by its files)")):
        _serve(legacy, folder)


def test_a_models_own_checkpoint_is_not_taken_for_a_merged_tree(legacy, tmp_path):
    legacy["serve"]["kt_method"] = "BF16"
    own = moe_model(tmp_path / "copy")
    keys = {"model.layers.0.mlp.experts.0.up_proj.weight": [4, 4], "model.embed_tokens.weight": [8, 4]}
    write_safetensors(own / "model-00001-of-00001.safetensors", keys)
    assert _serve(legacy, own)


@pytest.mark.parametrize(("method", "kernel"), [("AMXINT8", "INT4"), ("AMXINT4", "INT8")])
@pytest.mark.parametrize("layout", ["merged", "layers"])
def test_a_tree_of_the_other_amx_kernel_is_refused_by_its_files(legacy, tmp_path, method, kernel, layout):
    """kt-kernel opens <T::name()>_up_E_…kt (INT8_ for AMXINT8, INT4_ for AMXINT4); a merged tree's expert
    shapes tell the two apart. Before, a tree whose name did not say (cpu-weights) rendered under the other
    method: kt-kernel 0.7.2 then stops loading at "missing weight file …/INT8_down_0_…Byte_quant_.kt" (H200
    run, 2026-11-29), v0.4.4 prints "no such file" and goes on."""
    legacy["serve"]["kt_method"] = method

    def write(root, pools, kernel):
        return (
            _merged(root, pools, kernel)
            if layout == "merged"
            else write_tree(root, numa=pools, kernel=kernel)
        )

    tree = write(tmp_path / "cpu-weights", 2, kernel=kernel)
    with pytest.raises(RenderError, match=re.escape(f"holds {kernel} weights (by its files)")):
        _serve(legacy, tree)
    legacy["serve"]["kt_method"] = f"AMX{kernel}"
    assert _serve(legacy, tree)
    # the files outrank a name that says otherwise
    named = write(tmp_path / f"q-{method[3:]}", 2, kernel=kernel)
    legacy["serve"]["kt_method"] = method
    with pytest.raises(RenderError, match=re.escape(f"holds {kernel} weights (by its files)")):
        _serve(legacy, named)


WRAPPER = Path(__file__).resolve().parents[2] / "roles" / "kt_model_store" / "files" / "kt_store_convert.py"
KTINFRA = str(Path(sys.executable).parent / "ktinfra")


def _store(tmp_path, pools: int, *extra: str) -> tuple[int, dict]:
    """kt_model_store's wrapper with the stand-in converter (int8_tree.CONVERTER) and the real ktinfra."""
    src, script = tmp_path / "src", tmp_path / "kt-kernel" / "scripts" / "convert_cpu_weights.py"
    if not script.exists():
        moe_model(src)
        (src / "model.safetensors").write_bytes(b"WEIGHTS")
        script.parent.mkdir(parents=True)
        script.write_text(CONVERTER)
        (tmp_path / "cpu").mkdir()
    argv = [sys.executable, str(WRAPPER), "--python", sys.executable, "--script", str(script), "--input-path",
            str(src), "--quant-method", "int8", "--output", str(tmp_path / "cpu" / "m-INT8"),
            "--threadpool-count", str(pools), "--ktinfra", KTINFRA, *extra]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True)
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_store_converts_again_for_another_pool_count(tmp_path):
    """Before, the store's output was complete whatever the plan's kt_threadpool_count had become (the
    request records input, input type, quant, source and converter, not the split): a tree over 2 pools
    stayed in place for a 1-pool plan, which kt_serve then started."""
    assert _store(tmp_path, 2)[1]["changed"] is True
    assert _store(tmp_path, 2, "--check") == (0, {"changed": False, "complete": True, "output": ANY})
    assert _store(tmp_path, 1, "--check")[0] == 3
    rc, result = _store(tmp_path, 1)
    assert (rc, result["changed"]) == (0, True)
    manifest = json.loads((tmp_path / "cpu" / "m-INT8" / MANIFEST_NAME).read_text())
    assert manifest["threadpool_count"] == 1
    assert _store(tmp_path, 1, "--check")[0] == 0
    assert _store(tmp_path, 0, "--check")[0] == 0  # 0: no serve plan, the converter's default: not judged


def test_the_store_reads_the_split_of_both_layouts(tmp_path):
    spec = importlib.util.spec_from_file_location("kt_store_convert", WRAPPER)
    store = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(store)
    assert store.tree_pools(write_tree(tmp_path / "layers", numa=2)) == 2
    assert store.tree_pools(_merged(tmp_path / "merged", 2)) == 2  # int4 stays merged
    assert store.tree_pools(_merged(tmp_path / "merged1", 1)) == 1
    (tmp_path / "none").mkdir()
    assert store.tree_pools(tmp_path / "none") is None
