"""render convert against what kt-kernel's convert_cpu_weights.py (v0.7.0 / v0.4.4) is given."""

from __future__ import annotations

import json
import struct

import pytest
import yaml
from int8_tree import moe_model, write_tree
from test_render_support import load_fixture_plan

from ktinfra import int8_weights
from ktinfra.render import RenderError
from ktinfra.render.convert import render_convert
from ktinfra.render.train import render_train


def test_an_empty_input_type_is_refused_not_read_as_bf16():
    """`--input-type ''` became bf16 even where the plan's model ships FP8, so convert_cpu_weights.py would
    read FP8 weights as BF16; left out, the plan's native dtype is taken."""
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    plan["model"]["native_dtype"] = "fp8"
    argv = render_convert(model_path="/m", output="/o", plan=plan).info["argv"]
    assert argv[argv.index("--input-type") + 1] == "fp8"
    with pytest.raises(RenderError, match="--input-type is empty"):
        render_convert(model_path="/m", output="/o", plan=plan, input_type="")


def _checkpoint(
    root, dtype: str, indexed: bool = False, name: str = "model.layers.1.mlp.experts.0.gate_proj.weight"
):
    """A model directory whose safetensors shard holds one tensor `name` of `dtype` (header + bytes)."""
    root.mkdir(parents=True, exist_ok=True)
    size = {"BF16": 2, "F16": 2, "F8_E4M3": 1, "F32": 4}[dtype] * 4
    header = json.dumps({name: {"dtype": dtype, "shape": [2, 2], "data_offsets": [0, size]}}).encode()
    shard = "model-00001-of-00001.safetensors" if indexed else "model.safetensors"
    (root / shard).write_bytes(struct.pack("<Q", len(header)) + header + bytes(size))
    if indexed:
        (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {name: shard}}))
    return root


def _convert(model, **kwargs):
    return render_convert(model_path=str(model), output=str(model) + "-INT8", **kwargs)


@pytest.mark.parametrize("indexed", [False, True])
def test_the_input_type_must_be_the_dtype_of_the_checkpoints_experts(tmp_path, indexed):
    """convert_cpu_weights.py takes the experts' dtype from --input-type alone: bf16 tensors are used as they
    are, fp16 cast, fp8 dequantized (v0.7.0 OnlineQuantConverter). FP8 experts read as bf16, or FP16 bytes
    as BF16, reach the kernel as wrong weights; where the checkpoint is on this machine that is refused."""
    serve = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")  # native bf16
    fp8 = _checkpoint(tmp_path / "fp8", "F8_E4M3", indexed)
    with pytest.raises(RenderError, match="expert weight model.layers.1.mlp.experts.0.gate_proj.weight is "
                       "F8_E4M3; pass --input-type fp8"):  # fmt: skip
        _convert(fp8, plan=serve)
    argv = _convert(fp8, plan=serve, input_type="fp8").info["argv"]
    assert argv[argv.index("--input-type") + 1] == "fp8"
    bf16 = _checkpoint(tmp_path / "bf16", "BF16", indexed)
    assert _convert(bf16, plan=serve)
    with pytest.raises(RenderError, match="is BF16; pass --input-type bf16"):
        _convert(bf16, plan=serve, input_type="fp16")
    f32 = _checkpoint(tmp_path / "f32", "F32", indexed)
    with pytest.raises(RenderError, match="is F32; convert_cpu_weights.py's int8/int4 read only bf16, fp16"):
        _convert(f32, plan=serve)


def test_a_checkpoint_not_here_or_without_routed_experts_is_not_judged(tmp_path):
    serve = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    assert _convert(tmp_path / "elsewhere", plan=serve)  # rendering for another host
    dense = _checkpoint(tmp_path / "dense", "F32", name="model.layers.0.mlp.gate_proj.weight")
    assert _convert(dense, plan=serve)  # no routed expert named: the converter will say what it misses


def _sft_plan(tp_enabled: bool, pools: int) -> dict:
    plan = load_fixture_plan("h100-qwen3-30b-a3b-sft-current.json")
    plan["sft"]["kt"]["kt_config"].update(kt_tp_enabled=tp_enabled, kt_threadpool_count=pools)
    return plan


def _flags(rendered) -> dict:
    argv = rendered.info["argv"]
    return {
        flag: argv[argv.index(flag) + 1]
        for flag in ("--quant-method", "--cpuinfer-threads", "--threadpool-count")
    }


@pytest.mark.parametrize(("tp_enabled", "pools", "split"), [(False, 2, "1"), (True, 2, "2")])
def test_an_sft_plan_converts_over_the_pools_its_run_loads(tp_enabled, pools, split):
    """Before, render convert took serve plans only ('needs a serve plan, got a sft plan'), so an INT8 tree
    for training needed --cpuinfer-threads/--threadpool-count by hand, and kt-kernel loads it only when split
    over the pools the run uses: kt_threadpool_count with kt_tp_enabled, else one."""
    rendered = render_convert(model_path="/m", output="/o", plan=_sft_plan(tp_enabled, pools))
    assert _flags(rendered) == {
        "--quant-method": "int8",
        "--cpuinfer-threads": "14",
        "--threadpool-count": split,
    }
    int4 = render_convert(model_path="/m", output="/o", plan=_sft_plan(tp_enabled, pools), method="int4")
    assert _flags(int4)["--quant-method"] == "int4"
    given = render_convert(
        model_path="/m", output="/o", plan=_sft_plan(tp_enabled, pools), threadpool_count=int(split)
    )
    assert _flags(given)["--threadpool-count"] == split
    other = 3 - int(
        split
    )  # a tree over other pools than the run's would not load: refused, as with a serve plan
    with pytest.raises(RenderError, match=f"--threadpool-count {other} contradicts the plan's sft run"):
        render_convert(
            model_path="/m", output="/o", plan=_sft_plan(tp_enabled, pools), threadpool_count=other
        )


def test_an_sft_plans_converted_tree_is_the_one_render_train_loads(tmp_path):
    """The tree written with render convert's --threadpool-count from an sft plan passes render train's
    manifest check for that plan (both take the pools from kt_tp_enabled / kt_threadpool_count)."""
    plan = _sft_plan(True, 2)
    model = moe_model(tmp_path / "m")
    split = int(_flags(render_convert(model_path=str(model), output="/o", plan=plan))["--threadpool-count"])
    tree = write_tree(tmp_path / "m-INT8", numa=split)
    int8_weights.write_manifest(tree, model)
    args = {"name": "r", "model_path": str(model), "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}
    recipe = yaml.safe_load(render_train(plan, **args, weight_path=str(tree)).files["r.yaml"][0])
    assert recipe["kt_weight_path"] == str(tree)


def test_a_legacy_sft_plan_has_nothing_to_convert():
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-sft-legacy.json")
    with pytest.raises(
        RenderError, match="legacy-stack run: ktransformers 0.4 trains from the BF16 checkpoint"
    ):
        render_convert(model_path="/m", output="/o", plan=plan)
