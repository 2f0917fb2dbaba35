"""DeepSeek-V3.2's lightning indexer under tensor parallelism: SGLang builds wq_b, wk and weights_proj as
ReplicatedLinear (python/sglang/srt/layers/attention/nsa/nsa_indexer.py), so every rank holds all of them,
as it holds the MLA down-projections and the router; the extra copies were left out of the TP weights."""

from __future__ import annotations

import json

from model_configs import DEEPSEEK_V32
from test_plan import facts

from ktinfra import catalog, sizing
from ktinfra.planner import plan

L40S = "dual-spr-2xnuma-4xl40s"


def _v32(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(DEEPSEEK_V32))
    return str(tmp_path)


def test_tensor_parallelism_copies_the_indexer_to_every_rank(tmp_path):
    v32 = catalog.resolve(_v32(tmp_path))
    # per layer: wq_b 1536 -> 64 heads x 128, wk 7168 -> 128, weights_proj 7168 -> 64 heads
    indexer = (1536 * 64 * 128 + 7168 * 128 + 7168 * 64) * 61
    assert indexer == 851_509_248
    once = v32.router_params + 7168 * (1536 + 512 + 64) * 61 + indexer
    assert sizing.tp_extra_params(v32, 1) == 0
    assert sizing.tp_extra_params(v32, 4) == 3 * once


def test_a_four_gpu_plan_counts_the_indexer_copies_in_its_gpu_weights(tmp_path):
    model = _v32(tmp_path)
    v32 = catalog.resolve(model)
    result = plan(facts(L40S), model, "serve")
    dtype = result["serve"]["checkpoint_dtype"]
    assert len(result["serve"]["gpu_indices"]) == 4  # one TP rank per GPU
    single = sizing.serve(v32, result["serve"]["kt_method"], checkpoint_dtype=dtype)
    extra = result["requirements_breakdown"]["gpu_weights"] - single.breakdown["gpu_weights"]
    # three more copies of the router (bf16 in the FP8 checkpoint), the MLA down-projections and the indexer
    copies = 3 * (v32.router_params + 7168 * (1536 + 512 + 64) * 61 + 851_509_248)
    routers = 3 * v32.router_params
    assert extra == int(sizing.checkpoint_bytes(v32, copies, dtype, embeddings=routers))
