"""The KV cache as SGLang (sglang-kt 0.7.2) lays it out: one MLA latent per tensor-parallel rank, grouped KV
heads split over the ranks down to one each, and the token cap that keeps its MLA profile from
overcommitting the GPU."""

import json

import pytest
from model_configs import DEEPSEEK_V32
from test_plan import facts

from ktinfra import catalog, sizing
from ktinfra.planner import plan
from ktinfra.render import sglang_argv

L40S = "dual-spr-2xnuma-4xl40s"


@pytest.mark.parametrize("model", ["DeepSeek-V3", "Kimi-K2", "DeepSeek-V2-Lite"])
def test_an_mla_latent_is_held_by_every_rank(model):
    arch = catalog.resolve(model)
    one = sizing.kv_bytes_per_token(arch)
    assert one == arch.num_kv_layers * (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * 2
    assert [sizing.kv_bytes_per_token(arch, tp) for tp in (2, 4, 8)] == [2 * one, 4 * one, 8 * one]


def test_grouped_kv_heads_split_until_one_per_rank():
    arch = catalog.resolve("Qwen3-235B-A22B")  # 4 KV heads
    one = sizing.kv_bytes_per_token(arch)
    assert one == 94 * 2 * 4 * 128 * 2
    assert [sizing.kv_bytes_per_token(arch, tp) for tp in (2, 4)] == [one, one]
    assert sizing.kv_bytes_per_token(arch, 8) == 2 * one  # 8 ranks, 1 head each: every head twice


def _kv_space(result: dict, arch) -> float:
    """static - non-expert weights - GPU experts - the layer held for layerwise prefill, from the plan."""
    serve, breakdown = result["serve"], result["requirements_breakdown"]
    gpus = [g for g in facts(L40S)["gpus"] if g["index"] in serve["gpu_indices"]]
    static = serve["mem_fraction_static"] * sum(g["memory_mib"] for g in gpus) * 2**20
    experts = serve["kt_num_gpu_experts"] * sizing.gpu_expert_bytes(arch, serve["checkpoint_dtype"])
    held = 0.0
    if serve["kt_gpu_prefill_token_threshold"]:
        held = sizing.gpu_expert_bytes(arch, serve["checkpoint_dtype"]) * arch.num_experts
    return static - breakdown["gpu_weights"] - experts * arch.num_moe_layers - held


@pytest.mark.parametrize("model", ["DeepSeek-V3", "Kimi-K2-Thinking"])
def test_an_mla_pool_is_capped_at_the_memory_the_plan_leaves_it(model):
    arch = catalog.resolve(model)
    result = plan(facts(L40S), model, "serve")
    serve = result["serve"]
    per_token = sizing.kv_bytes_per_token(arch, serve["tensor_parallel_size"])
    tokens = serve["max_total_tokens"]
    assert tokens == int(_kv_space(result, arch) // per_token)
    assert tokens >= serve["max_running_requests"] * 4096
    reason = result["reasons"]["max_total_tokens"]
    assert "192 values per layer" in reason and "576" in reason and "3.0x" in reason
    argv = sglang_argv(result, model_path="/m", weight_path="/w")
    assert argv[argv.index("--max-total-tokens") + 1] == str(tokens)


@pytest.mark.parametrize("model", ["Qwen3-30B-A3B", "Qwen3-235B-A22B"])
def test_sglang_sizes_other_pools_itself(model):
    result = plan(facts(L40S), model, "serve")
    assert result["serve"]["max_total_tokens"] is None
    assert "--max-total-tokens" not in sglang_argv(result, model_path="/m", weight_path="/w")


def test_tensor_parallel_kv_counts_in_the_budget_and_the_minimum():
    arch = catalog.resolve("DeepSeek-V3")
    result = plan(facts(L40S), "DeepSeek-V3", "serve")
    serve, breakdown = result["serve"], result["requirements_breakdown"]
    assert serve["tensor_parallel_size"] == 4
    assert breakdown["kv_cache_min"] == 4 * 4096 * sizing.kv_bytes_per_token(arch)
    budget = serve["max_running_requests"] * 4096 * sizing.kv_bytes_per_token(arch, 4)
    assert f"({budget / 1e9:.0f} GB)" in result["reasons"]["max_running_requests"]


def test_running_requests_leave_room_for_the_layerwise_prefill_layer():
    """Kimi-K2-Thinking (RAWINT4) on 4 x L40S: 128 requests of replicated KV would crowd out the 9.5 GB MoE
    layer layerwise prefill needs; the requests are halved instead."""
    result = plan(facts(L40S), "Kimi-K2-Thinking", "serve")
    serve = result["serve"]
    assert serve["kt_gpu_prefill_token_threshold"] == 2048
    assert serve["max_running_requests"] == 64
    reason = result["reasons"]["max_running_requests"]
    assert "halved from 128" in reason and "9.5 GB MoE layer kept for layerwise prefill" in reason
    assert serve["kt_num_gpu_experts"] > 0


def test_what_sglang_kt_profiles_for_an_mla_token(tmp_path):
    """23,424 and 31,476 bytes: what sglang-kt 0.7.2's get_cell_size_per_token gives for DeepSeek-V3 and
    V3.2 (molecule envs runs that function from the installed sources and compares it with this)."""
    v3 = catalog.resolve("DeepSeek-V3")
    assert sizing.mla_profiled_bytes_per_token(v3) == 61 * (128 + 64) * 2 == 23_424
    (tmp_path / "config.json").write_text(json.dumps(DEEPSEEK_V32))
    v32 = catalog.resolve(str(tmp_path))
    assert sizing.mla_profiled_bytes_per_token(v32) == 23_424 + 61 * (128 + 4) == 31_476
    result = plan(facts("h100-amx"), str(tmp_path), "serve")
    reason = result["reasons"]["max_total_tokens"]
    assert "2.5x" in reason and "DSA index keys" in reason  # 78,324 stored / 31,476 profiled
    tokens = result["serve"]["max_total_tokens"]
    assert tokens * sizing.kv_bytes_per_token(v32) <= 80 * 2**30


def test_weights_sglang_keeps_whole_on_every_rank():
    v3 = catalog.resolve("DeepSeek-V3")
    once = v3.router_params + 7168 * (1536 + 512 + 64) * 61  # MoEGate, q_a_proj, kv_a_proj_with_mqa
    assert sizing.tp_extra_params(v3, 1) == 0
    assert sizing.tp_extra_params(v3, 4) == 3 * once
    q235 = catalog.resolve("Qwen3-235B-A22B")  # 4 KV heads: TP 8 holds each K/V projection twice
    assert sizing.tp_extra_params(q235, 4) == 3 * q235.router_params
    assert sizing.tp_extra_params(q235, 8) == 7 * q235.router_params + 4 * 2 * 128 * 4096 * 94
    result = plan(facts(L40S), "DeepSeek-V3", "serve")
    single = sizing.serve(
        v3, result["serve"]["kt_method"], checkpoint_dtype=result["serve"]["checkpoint_dtype"]
    )
    extra = result["requirements_breakdown"]["gpu_weights"] - single.breakdown["gpu_weights"]
    # 3 extra copies in the checkpoint's dtype, the routers (MoEGate) in bf16 as FP8 checkpoints keep them
    routers = 3 * v3.router_params
    assert extra == int(
        sizing.checkpoint_bytes(v3, 3 * once, result["serve"]["checkpoint_dtype"], embeddings=routers)
    )
    assert (
        f"{result['requirements_breakdown']['gpu_weights'] / 1e9:.1f} GB non-expert weights"
        in (result["reasons"]["kt_num_gpu_experts"])
    )


def test_the_prefill_layer_is_given_up_only_when_one_request_cannot_fit_beside_it():
    from ktinfra.plan.serve import _running_requests

    # 100 static, 40 weights, 10 per request: the 20 layer leaves room for 4 of the 8 wanted
    assert _running_requests(8, 40.0, 20.0, 10.0, 100.0) == (4, 20.0)
    # a 55 layer leaves no room for one request: the layer goes, the requests get the memory
    assert _running_requests(8, 40.0, 55.0, 10.0, 100.0) == (4, 0.0)
    assert _running_requests(4, 40.0, 20.0, 10.0, 100.0) == (4, 20.0)
