"""What the legacy stack's converter writes and reads, pinned against render convert and int8_weights.

Established from kvcache-ai/ktransformers at v0.4.4 = 0bce173e3b9306c181a3cd8f9ef3f8f944a4311e (the
kt-0.4-autodl profile's kt-kernel and converter):
- kt-kernel/scripts/convert_cpu_weights.py:922-962: flags --input-path/-i, --input-type {awq,fp8,fp16,bf16}
  (required), --output/-o, --quant-method {int4,int8,awq,moe_int4,moe_int8} (default int4),
  --cpuinfer-threads (60), --threadpool-count (2), --gpu, --no-merge-safetensor, --resume-layer.
- Default output (:417-451) is merged: model.safetensors (model-NNNNN.safetensors past 3000 tensors) with
  blk.L.ffn_{up,gate,down}_exps.E.numa.M.{weight,scale} plus the non-expert tensors and config/tokenizer
  files; with --no-merge-safetensor (:907-911, :454-456) only the _layer_N/_numa_M folders kt-kernel wrote.
- operators/amx/moe.hpp:74-96,178: _layer_N/_numa_M/ + T::name() + "_up_"/"_gate_"/"_down_" + E + "_" +
  bytes + "Byte_quant_.kt" / "Byte_scale_.kt", name "INT8" (la/amx_kernels.hpp:823); bytes from
  BufferB::required_size(n, k) = n*k + 4n (:922), split as quant n*k, scale 4n, n/k from the pool's share of
  the intermediate size (moe-tp.hpp:117). The same names and sizes as kt-kernel 0.7.2's tree.
- python/utils/amx.py:86-97,281-282: the serve-time loader takes the merged layout when weight_path holds any
  *.safetensors, else hands weight_path to the C++ loader (_layer_N/_numa_M); it reads no manifest
  (kt-weight-manifest.json is inert there). The sglang fork (eaf832ef, kt_ep_wrapper.py:670-689) passes
  --kt-weight-path, --kt-method, --kt-threadpool-count as they are.
So the layer tree render convert asks for, and the manifest ktinfra writes beside it, hold for this stack too.
"""

from __future__ import annotations

from int8_tree import moe_model
from test_render_support import load_fixture_plan

from ktinfra import int8_weights
from ktinfra.render.convert import render_convert

V044_FLAGS = {
    "--input-path", "--input-type", "--output", "--quant-method", "--cpuinfer-threads", "--threadpool-count",
    "--gpu", "--no-merge-safetensor", "--resume-layer",
}  # fmt: skip


def test_a_legacy_serve_plans_conversion_uses_only_v044_flags():
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    assert plan["stack"] == "kt-0.4-autodl"
    info = render_convert(model_path="/m", output="/m-INT8", plan=plan).info
    flags = {word for word in info["argv"][2:] if word.startswith("--")}
    assert flags <= V044_FLAGS and "--no-merge-safetensor" in flags
    argv = info["argv"]
    assert argv[argv.index("--quant-method") + 1] == "int8"
    assert argv[argv.index("--input-type") + 1] in ("bf16", "fp16", "fp8")
    assert argv[argv.index("--threadpool-count") + 1] == str(plan["serve"]["kt_threadpool_count"])
    assert info["finish_argv"][1:3] == ["weights", "manifest"]
    assert info["done_marker"] == f"/m-INT8/{int8_weights.MANIFEST_NAME}"


def _v044_tree(root, layers, experts, hidden, inter, pools):
    """Files named and sized as v0.4.4's AMX_MOE_TP::write_weights names them (computed here, not taken
    from int8_tree): BufferB n*k int8 + n float32 scales, n = the pool's rows."""
    part = inter // pools
    shapes = {"up": (part, hidden), "gate": (part, hidden), "down": (hidden, part)}  # (n, k)
    for layer in layers:
        for pool in range(pools):
            folder = root / f"_layer_{layer}" / f"_numa_{pool}"
            folder.mkdir(parents=True)
            for expert in range(experts):
                for mat, (n, k) in shapes.items():
                    (folder / f"INT8_{mat}_{expert}_{n * k}Byte_quant_.kt").write_bytes(bytes(n * k))
                    (folder / f"INT8_{mat}_{expert}_{4 * n}Byte_scale_.kt").write_bytes(bytes(4 * n))
    return root


def test_a_v044_layer_tree_gets_its_manifest_and_passes_the_check(tmp_path):
    model = moe_model(tmp_path / "m")  # 2 layers, 4 experts, hidden 64, moe_intermediate 32
    tree = _v044_tree(tmp_path / "m-INT8", (0, 1), 4, 64, 32, pools=2)
    summary = int8_weights.write_manifest(tree, model)
    assert (summary["layers"], summary["threadpool_count"], summary["files"]) == (2, 2, 2 * 2 * 4 * 3 * 2)
    assert int8_weights.check_manifest(tree, model)["threadpool_count"] == 2
