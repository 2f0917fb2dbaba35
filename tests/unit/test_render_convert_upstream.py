"""render convert against what kt-kernel's convert_cpu_weights.py (v0.7.0 / v0.4.4) is given."""

from __future__ import annotations

import json
import struct

import pytest
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError
from ktinfra.render.convert import render_convert


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
