import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from model_configs import MIXTRAL_8X7B

from ktinfra.planner import PlanInputError, load_facts, plan

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
GB = 1e9


def facts(name: str) -> dict:
    return load_facts(FACTS / f"{name}.json")


SEED002 = "seed002-autodl-6430-4090"
CONTRACT_TOP = {"schema", "feasible", "mode", "stack", "stack_generation", "model", "host", "requirements",
                "reasons", "problems"}  # fmt: skip
CONTRACT_SERVE = {
    "kt_method", "kt_weight_format", "kt_weight_path", "kt_cpuinfer", "kt_threadpool_count",
    "kt_num_gpu_experts", "kt_max_deferred_experts_per_token", "kt_gpu_prefill_token_threshold",
    "mem_fraction_static",
    "chunked_prefill_size", "max_running_requests", "max_total_tokens", "context_length", "cuda_graph_max_bs",
    "tensor_parallel_size", "enable_mixed_chunk", "trust_remote_code", "host", "port", "served_model_name",
    "lora", "numa_cpus",
}  # fmt: skip


# --- golden: seed 002 §4.3.1's hand-tuned launch line on its host --------------------------------------
# python -m sglang.launch_server --host 0.0.0.0 --port 8000 --model .../Qwen3-30B-A3B --trust-remote-code
#   --mem-fraction-static 0.92 --chunked-prefill-size 4096 --served-model-name Qwen3-30B-A3B
#   --enable-mixed-chunk --kt-method AMXINT8 --kt-cpuinfer 8 --kt-threadpool-count 2
#   --kt-num-gpu-experts 32 --kt-max-deferred-experts-per-token 2
SEED002_LINE = {
    "mem_fraction_static": 0.92,
    "chunked_prefill_size": 4096,
    "kt_method": "AMXINT8",
    "kt_cpuinfer": 8,
    "kt_threadpool_count": 2,
    "kt_max_deferred_experts_per_token": 2,
    "enable_mixed_chunk": True,
    "trust_remote_code": True,
    "served_model_name": "Qwen3-30B-A3B",
    "tensor_parallel_size": 1,
}


@pytest.fixture(scope="module")
def golden():
    return plan(facts(SEED002), "Qwen3-30B-A3B", "serve")


@pytest.mark.parametrize("key,value", SEED002_LINE.items())
def test_seed002_decisions_reproduced(golden, key, value):
    assert golden["feasible"] and golden["serve"][key] == value


def test_seed002_gpu_experts_deviation_is_one_expert_and_explained(golden):
    # The seed's 32 leaves 0.3 GB less KV than 16 requests x 4096 tokens; the planner keeps that KV.
    assert golden["serve"]["kt_num_gpu_experts"] == 31
    assert "32 would cut" in golden["reasons"]["kt_num_gpu_experts"]


def test_seed002_binding_deviation_is_explained_and_follows_the_api_key(golden):
    assert (golden["serve"]["host"], golden["serve"]["port"]) == ("127.0.0.1", 30000)
    assert "no API key" in golden["reasons"]["host"]
    keyed = plan(facts(SEED002), "Qwen3-30B-A3B", "serve", api_key_set=True, port=8000)
    assert (keyed["serve"]["host"], keyed["serve"]["port"]) == ("0.0.0.0", 8000)


def test_seed002_cpuinfer_reason_names_the_kt_run_oversubscription(golden):
    assert "0.8 x logical = 12 would oversubscribe" in golden["reasons"]["kt_cpuinfer"]


def test_container_pinned_to_one_numa_node_gets_one_thread_pool():
    host = facts(SEED002)
    host["cpu"]["usable_cpus"] = "0-7,64-71"  # a cpuset inside node 0 instead of a quota over both nodes
    result = plan(host, "Qwen3-30B-A3B", "serve")
    assert result["serve"]["kt_threadpool_count"] == 1
    assert "1 NUMA node" in result["reasons"]["kt_threadpool_count"]


# --- the real H100 + AMX capture -----------------------------------------------------------------------
def test_h100_qwen3_30b_reads_bf16_in_place_because_the_disk_cannot_hold_int8_conversion():
    result = plan(facts("h100-amx"), "Qwen3-30B-A3B", "serve")
    serve = result["serve"]
    assert result["feasible"]
    assert serve["kt_method"] == "BF16" and "91.1 GB disk" in result["reasons"]["kt_method"]
    assert (serve["kt_cpuinfer"], serve["kt_threadpool_count"], serve["max_running_requests"]) == (14, 1, 32)
    assert serve["kt_num_gpu_experts"] == 128 and serve["kt_max_deferred_experts_per_token"] == 0


def test_h100_with_room_on_disk_uses_amxint8_where_kt_kernel_runs_experts():
    host = facts("h100-amx")
    host["disks"][0]["avail_bytes"] = 500 * 10**9
    assert plan(host, "Qwen3-235B-A22B", "serve")["serve"]["kt_method"] == "AMXINT8"  # most on the CPU


def test_every_expert_on_the_gpu_plans_the_checkpoints_format_not_a_conversion():
    """Before: an H100 with room on disk planned AMXINT8 for Qwen3-30B-A3B with all 128 experts on the GPU:
    a 29 GB conversion kt-kernel would never read."""
    host = facts("h100-amx")
    host["disks"][0]["avail_bytes"] = 500 * 10**9
    result = plan(host, "Qwen3-30B-A3B", "serve")
    serve = result["serve"]
    assert result["feasible"] and serve["kt_method"] == "BF16" and serve["kt_num_gpu_experts"] == 128
    assert serve["kt_weight_format"] == "bf16" and serve["kt_gpu_prefill_token_threshold"] is None
    assert result["reasons"]["kt_method"] == (
        "every expert fits on the GPU (128 per MoE layer), so kt-kernel runs none: BF16 reads the bf16 "
        "checkpoint in place instead of an AMXINT8 conversion of 29.0 GB that would never be read"
    )
    assert not result["warnings"]
    asked = plan(host, "Qwen3-30B-A3B", "serve", cpu_format="AMXINT8")  # asked for: kept, with a warning
    assert asked["serve"]["kt_method"] == "AMXINT8" and asked["serve"]["kt_num_gpu_experts"] == 128
    unread = "29.0 GB of int8 CPU weights would be converted and never read"
    assert any(unread in w for w in asked["warnings"]), asked["warnings"]


def test_h100_deepseek_v3_is_infeasible_with_numbers():
    result = plan(facts("h100-amx"), "DeepSeek-V3", "serve")
    assert not result["feasible"]
    assert "needs 657 GB RAM (654 GB of experts + 3.0 GB runtime), host has 135 GB" in result["problems"]
    disk = "needs 1343 GB disk (689 GB download + 654 GB CPU weights + 1.0 GB outputs), / has 68.7 GB free"
    assert disk in result["problems"]


def _local_copy(tmp_path: Path, name: str, **changes) -> str:
    from ktinfra import catalog

    (tmp_path / name).mkdir()
    (tmp_path / name / "config.json").write_text(json.dumps({**catalog.entry_config(name), **changes}))
    return str(tmp_path / name)


def test_a_local_model_directory_is_not_charged_its_download_again(tmp_path):
    """Before: the 61.1 GB already on disk was counted again, so the H100 (68.7 GB free) fell back to BF16
    (60.98 GB RAM) and kt_serve, which plans after the model store has downloaded, saw a false shortage."""
    local = _local_copy(tmp_path, "Qwen3-30B-A3B")
    result = plan(facts("h100-amx"), local, "serve", cpu_format="AMXINT8")
    breakdown = result["requirements_breakdown"]
    assert result["feasible"] and result["serve"]["kt_method"] == "AMXINT8"
    assert breakdown["download"] == 0
    assert result["requirements"]["disk_bytes"] == breakdown["cpu_weights_on_disk"] + breakdown["outputs"]
    assert round(result["requirements"]["disk_bytes"] / GB, 1) == 30.0
    catalog_plan = plan(facts("h100-amx"), "Qwen3-30B-A3B", "serve")
    assert catalog_plan["requirements_breakdown"]["download"] > 61 * GB  # by name it still has to come
    # unasked, every expert fits the H100: no conversion at all, only the outputs on disk
    default = plan(facts("h100-amx"), local, "serve")
    assert default["serve"]["kt_method"] == "BF16" and default["requirements_breakdown"]["download"] == 0


def test_a_local_fp8_model_for_sft_is_charged_only_its_bf16_copy(tmp_path):
    local = plan(facts("h100-amx"), _local_copy(tmp_path, "DeepSeek-V3"), "sft")["requirements_breakdown"]
    named = plan(facts("h100-amx"), "DeepSeek-V3", "sft")["requirements_breakdown"]
    assert local["download"] == 0 and named["download"] > 680 * GB
    assert local["bf16_conversion"] == named["bf16_conversion"] > 1300 * GB


def test_serving_an_fp8_model_in_bf16_counts_the_fp8_download_and_the_bf16_copy():
    """Before: the BF16 copy was called the download and the FP8 checkpoint it is made from was left out."""
    result = plan(facts("h100-amx"), "DeepSeek-V3", "serve", cpu_format="BF16")
    breakdown = result["requirements_breakdown"]
    assert round(breakdown["download"] / GB) == 689 and round(breakdown["bf16_conversion"] / GB) == 1369
    assert result["requirements"]["disk_bytes"] == sum(
        breakdown[key] for key in ("download", "bf16_conversion", "cpu_weights_on_disk", "outputs")
    )
    assert any("689 GB download + 1369 GB BF16 copy" in p for p in result["problems"])


def test_converted_weights_already_in_the_store_are_not_charged_again(tmp_path):
    """kt_serve plans after kt_model_store has downloaded and converted: before, the 29 GB of INT8 experts
    (and the 61 GB download) counted again, and the role passed INT8 weights beside a BF16 plan."""
    model = _local_copy(tmp_path, "Qwen3-30B-A3B")
    (tmp_path / "int8").mkdir()
    (tmp_path / "int8" / "layer0.kt").write_text("x")
    stored = plan(facts("h100-amx"), model, "serve", cpu_format="AMXINT8", weight_path=str(tmp_path / "int8"))
    assert stored["feasible"] and stored["serve"]["kt_weight_path"] == str(tmp_path / "int8")
    assert stored["requirements"]["disk_bytes"] == stored["requirements_breakdown"]["outputs"]
    assert "not counted again" in stored["reasons"]["kt_weight_path"]
    later = plan(facts("h100-amx"), model, "serve", cpu_format="AMXINT8", weight_path=str(tmp_path / "new"))
    assert round(later["requirements"]["disk_bytes"] / GB, 1) == 30.0
    assert "the conversion writes 29.0 GB" in later["reasons"]["kt_weight_path"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "--weight-path names converted CPU weights: give the --cpu-format they hold"),
        ({"cpu_format": "BF16"}, "not BF16, which reads the checkpoint itself"),
        ({"cpu_format": "AMXINT8", "weight_path": "rel/int8"}, "--weight-path must be an absolute path"),
    ],
)
def test_weight_path_needs_the_format_it_holds(options, message):
    with pytest.raises(PlanInputError, match=re.escape(message)):
        plan(facts("h100-amx"), "Qwen3-30B-A3B", "serve", **{"weight_path": "/srv/int8", **options})


FP8_BLOCKS = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}


def test_fp8_blocks_limit_tensor_parallel_to_whole_blocks_per_rank(tmp_path):
    """Qwen3-30B-A3B-FP8: experts 768 wide; over 4 ranks 192 rows, not whole 128-row blocks, which SGLang's
    Fp8 MoE refuses at load ("not divisible by weight quantization block_n"); over 2 ranks 384 = 3 x 128."""
    host = facts("dual-spr-2xnuma-4xl40s")
    fp8 = plan(host, _local_copy(tmp_path, "Qwen3-30B-A3B", **FP8_BLOCKS), "serve", cpu_format="FP8")
    assert fp8["serve"]["tensor_parallel_size"] == 2
    assert "whole 128-row fp8 scale blocks of the 768-wide MLPs" in fp8["reasons"]["tensor_parallel_size"]
    assert plan(host, "Qwen3-30B-A3B", "serve")["serve"]["tensor_parallel_size"] == 4  # bf16: no blocks
    v3 = plan(host, "DeepSeek-V3", "serve")  # 2048 / 4 = 512, dense 18432 / 4 = 4608: whole blocks
    assert v3["serve"]["tensor_parallel_size"] == 4


@pytest.mark.parametrize("block", [[128], [0, 128], "128x128", [128.0, 128]])
def test_a_bad_fp8_block_size_is_named(tmp_path, block):
    config = {"quantization_config": {"quant_method": "fp8", "weight_block_size": block}}
    with pytest.raises(PlanInputError, match="quantization_config.weight_block_size must be two block sizes"):
        plan(facts("h100-amx"), _local_copy(tmp_path, "Qwen3-30B-A3B", **config), "serve")


def test_h100_sft_qwen3_235b_short_of_ram():
    result = plan(facts("h100-amx"), "Qwen3-235B-A22B", "sft")
    assert not result["feasible"]
    assert any(p.startswith("needs 483 GB RAM") and p.endswith("host has 135 GB") for p in result["problems"])


# --- CPU without AMX -----------------------------------------------------------------------------------
def test_no_amx_serves_llamafile_gguf():
    result = plan(facts("xeon8352v-4090-noamx"), "Qwen3-30B-A3B", "serve")
    assert result["feasible"]
    assert (result["serve"]["kt_method"], result["serve"]["kt_weight_format"]) == ("LLAMAFILE", "gguf:Q4_K_M")


def test_no_amx_refuses_sft():
    result = plan(facts("xeon8352v-4090-noamx"), "DeepSeek-V2-Lite", "sft")
    assert not result["feasible"]
    assert any("needs AMX" in p for p in result["problems"])


UNKNOWN_FLAGS = "CPU flags unknown (the capture has no cpuinfo/lscpu)"


def _capture_without_cpu_flags(tmp_path: Path) -> dict:
    from ktinfra.facts import from_capture

    capture = tmp_path / "capture"
    shutil.copytree(FACTS.parent / "hosts" / "h100-xeon-amx-16c", capture)
    for name in ("cpuinfo.txt", "lscpu.json", "lscpu.txt"):
        (capture / name).unlink()
    return from_capture(capture)


def test_unknown_cpu_flags_are_a_problem_of_their_own_not_missing_flags(tmp_path):
    host = _capture_without_cpu_flags(tmp_path)
    serve = plan(host, "Qwen3-30B-A3B", "serve")
    assert not serve["feasible"]
    assert f"{UNKNOWN_FLAGS}: cannot tell which kt-kernel backend runs on this CPU" in serve["problems"]
    assert not any("lacks" in p or "missing" in p for p in serve["problems"])
    requested = plan(host, "Qwen3-30B-A3B", "serve", cpu_format="AMXINT8")["problems"]
    assert f"--cpu-format AMXINT8 needs CPU flags amx_tile, amx_int8; {UNKNOWN_FLAGS}" in requested
    sft = plan(host, "Qwen3-30B-A3B", "sft")["problems"]
    assert f"KT fine-tuning needs AMX (seed 000: `lscpu | grep -i amx`); {UNKNOWN_FLAGS}" in sft
    assert not any("None" in text for r in (serve, sft) for text in json.dumps(r).split('"'))


def test_a_cpu_without_amx_and_without_a_model_name_is_called_this_cpu():
    host = facts("xeon8352v-4090-noamx")
    host["cpu"]["model"] = None
    problems = plan(host, "DeepSeek-V2-Lite", "sft")["problems"]
    assert "KT fine-tuning needs AMX (seed 000: `lscpu | grep -i amx`); this CPU has none" in problems


def test_avx512_bf16_without_amx_serves_native_bf16():
    host = facts("xeon8352v-4090-noamx")
    host["cpu"]["isa"]["avx512_bf16"] = True  # e.g. an AMD Zen 4 EPYC
    assert plan(host, "DeepSeek-V2-Lite", "serve")["serve"]["kt_method"] == "BF16"


def test_requested_amx_format_on_a_cpu_without_amx_is_a_problem():
    result = plan(facts("xeon8352v-4090-noamx"), "Qwen3-30B-A3B", "serve", cpu_format="AMXINT4")
    assert not result["feasible"] and any("amx_tile" in p for p in result["problems"])


# --- GPUs, platform ------------------------------------------------------------------------------------
def test_no_gpu_is_infeasible():
    host = facts("h100-amx")
    host["gpus"] = []
    result = plan(host, "DeepSeek-V2-Lite", "serve")
    assert not result["feasible"] and any("no NVIDIA GPU" in p for p in result["problems"])


def test_turing_gpu_is_refused():
    host = facts("h100-amx")
    host["gpus"][0].update(name="Tesla T4", memory_mib=15360, compute_capability="7.5")
    result = plan(host, "DeepSeek-V2-Lite", "serve")
    assert any("compute capability 7.5" in p for p in result["problems"])


def test_old_glibc_is_refused_with_the_profile_minimum():
    host = facts("h100-amx")
    host["os"]["glibc"] = "2.31"
    result = plan(host, "DeepSeek-V2-Lite", "serve")
    assert "glibc 2.31 is older than 2.35, which the kt-0.7 wheels (manylinux) need" in result["problems"]


def test_small_gpu_cannot_hold_the_non_expert_weights():
    host = facts(SEED002)
    result = plan(host, "DeepSeek-V3", "serve")  # 19 GB of FP8 non-expert weights fit a 24 GB 4090, barely
    assert result["serve"]["kt_num_gpu_experts"] == 0
    host["gpus"][0].update(name="NVIDIA RTX A2000", memory_mib=12288, compute_capability="8.6")
    small = plan(host, "DeepSeek-V3", "serve")
    assert any(
        p.startswith("needs 2") and "GPU memory" in p and "has 12.9 GB" in p for p in small["problems"]
    )


def test_four_gpus_run_tensor_parallel_and_hold_more_experts():
    lab = facts("dual-spr-2xnuma-4xl40s")
    result = plan(lab, "DeepSeek-V3", "serve")
    serve = result["serve"]
    assert result["feasible"] and serve["tensor_parallel_size"] == 4
    one = copy.deepcopy(lab)
    one["gpus"] = one["gpus"][:1]
    assert plan(one, "DeepSeek-V3", "serve")["serve"]["kt_num_gpu_experts"] < serve["kt_num_gpu_experts"]
    assert (serve["kt_cpuinfer"], serve["kt_threadpool_count"]) == (112, 2)


def test_serving_a_lora_keeps_every_expert_on_the_cpu():
    result = plan(facts(SEED002), "Qwen3-30B-A3B", "serve", lora={"style": "/root/autodl-tmp/lora"})
    assert result["serve"]["kt_num_gpu_experts"] == 0
    assert result["serve"]["lora"] == {"paths": {"style": "/root/autodl-tmp/lora"}, "max_loras_per_batch": 1,
                                       "backend": "triton"}  # fmt: skip


def test_native_fp8_backend_reserves_a_layer_for_gpu_prefill():
    result = plan(facts("dual-spr-2xnuma-4xl40s"), "Kimi-K2", "serve", cpu_format="FP8")
    assert result["serve"]["kt_method"] == "FP8"
    assert result["serve"]["kt_gpu_prefill_token_threshold"] == 2048


# --- SFT recipes per stack generation ------------------------------------------------------------------
def test_current_stack_sft_keys_follow_llamafactory_kt_config():
    result = plan(facts("dual-spr-2xnuma-4xl40s"), "Qwen3-235B-A22B", "sft")
    sft = result["sft"]
    assert result["feasible"] and result["stack_generation"] == "current"
    assert sft["kt"]["use_kt"] is True
    assert sft["kt"]["kt_config"] == {
        "kt_backend": "AMXBF16", "kt_expert_weight_format": "bf16", "kt_num_threads": 112,
        "kt_tp_enabled": True, "kt_threadpool_count": 2, "kt_max_cache_depth": 2,
        "kt_share_backward_bb": True,
    }  # fmt: skip
    assert sft["launcher"]["accelerate_config"].endswith("fsdp2_kt_bf16.yaml")
    assert sft["launcher"]["env"] == {"USE_KT": "1", "ACCELERATE_USE_KT": "true"}
    assert sft["launcher"]["num_processes"] == 4
    assert (sft["lora_rank"], sft["lora_target"], sft["template"]) == (8, "all", "qwen3")


def test_legacy_stack_sft_keys_and_placement_rule():
    result = plan(facts("dual-spr-2xnuma-4xl40s"), "DeepSeek-V3", "sft", stack="kt-0.4-autodl")
    kt = result["sft"]["kt"]
    assert result["stack_generation"] == "legacy"
    rule = "examples/kt_optimize_rules/DeepSeek-V3-Chat-sft-amx-multi-gpu-4.yaml"
    assert kt == {"use_kt": True, "kt_optimize_rule": rule, "cpu_infer": 112, "chunk_size": 8192}
    assert result["sft"]["launcher"]["env"] == {"USE_KT": "1"}


@pytest.mark.parametrize(
    ("model", "rule_gpus"),
    [("Qwen3-235B-A22B-Instruct-2507", 1), ("DeepSeek-V2-Lite", 2), ("DeepSeek-V3", 4)],
)
def test_legacy_sft_uses_and_sizes_the_gpus_of_its_placement_rule(model, rule_gpus):
    """One llamafactory-cli process, placed by its kt_optimize_rule (Qwen3Moe-sft-amx.yaml: everything on
    "cuda"): on 4 GPUs a 1-GPU rule trains on GPU 0 alone, and the batch must fit that one GPU."""
    host = facts("dual-spr-2xnuma-4xl40s")
    result = plan(host, model, "sft", stack="kt-0.4-autodl")
    sft = result["sft"]
    assert sft["gpu_indices"] == list(range(rule_gpus))
    assert f"placement rule for {rule_gpus} GPU(s)" in result["reasons"]["kt"]
    alone = plan({**host, "gpus": host["gpus"][:rule_gpus]}, model, "sft", stack="kt-0.4-autodl")
    recipe = ("cutoff_len", "per_device_train_batch_size", "gradient_accumulation_steps")
    assert [sft[k] for k in recipe] == [alone["sft"][k] for k in recipe]
    assert result["requirements"]["vram_bytes"] == alone["requirements"]["vram_bytes"]


def test_legacy_deepseek_sft_runs_without_gradient_checkpointing_and_needs_more_vram():
    # The legacy DeepSeek rules swap in KDeepseekV2Model, whose forward turns checkpointing off.
    host = facts(SEED002)
    legacy = plan(host, "DeepSeek-V2-Lite", "sft", stack="kt-0.4-autodl")
    current = plan(host, "DeepSeek-V2-Lite", "sft")
    assert legacy["reasons"]["gradient_checkpointing"].startswith("off")
    assert "KDeepseekV2Model" in legacy["reasons"]["gradient_checkpointing"]
    assert current["reasons"]["gradient_checkpointing"].startswith("on")
    same = (legacy["sft"]["cutoff_len"], legacy["sft"]["per_device_train_batch_size"]) == (
        current["sft"]["cutoff_len"],
        current["sft"]["per_device_train_batch_size"],
    )
    # Either the legacy plan needs more VRAM for the same recipe, or it had to pick a smaller one.
    assert legacy["requirements"]["vram_bytes"] > current["requirements"]["vram_bytes"] or not same


def test_legacy_qwen3_sft_keeps_gradient_checkpointing():
    legacy = plan(facts(SEED002), "Qwen3-30B-A3B", "sft", stack="kt-0.4-autodl")
    assert legacy["reasons"]["gradient_checkpointing"].startswith("on")
    assert legacy["requirements"] == plan(facts(SEED002), "Qwen3-30B-A3B", "sft")["requirements"]


def test_sft_batch_shrinks_to_one_with_accumulation_when_vram_is_tight():
    roomy = plan(facts("h100-amx"), "DeepSeek-V2-Lite", "sft")["sft"]
    tight = plan(facts(SEED002), "Qwen3-235B-A22B", "sft")["sft"]
    assert (roomy["per_device_train_batch_size"], roomy["gradient_accumulation_steps"]) == (4, 2)
    assert (tight["per_device_train_batch_size"], tight["gradient_accumulation_steps"]) == (1, 8)
    assert "tight" in plan(facts(SEED002), "Qwen3-235B-A22B", "sft")["reasons"]["per_device_train_batch_size"]


def test_sft_on_a_20gb_gpu_shortens_cutoff_to_fit():
    host = facts(SEED002)
    host["gpus"][0].update(name="NVIDIA RTX 4000 Ada", memory_mib=20475)
    host["memory"]["total_bytes"] = 10**12
    host["disks"][1]["avail_bytes"] = 10**13
    result = plan(host, "Qwen3-235B-A22B", "sft")
    assert result["sft"]["cutoff_len"] == 1024 and "down from 2048" in result["reasons"]["cutoff_len"]


# --- contract and bad input ----------------------------------------------------------------------------
def test_plan_json_has_the_contract_keys(golden):
    assert CONTRACT_TOP <= golden.keys() and CONTRACT_SERVE <= golden["serve"].keys()
    assert set(golden["requirements"]) == {"vram_bytes", "ram_bytes", "disk_bytes"}
    assert all(isinstance(v, int) for v in golden["requirements"].values())
    json.dumps(golden)


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda f: f.pop("cpu"), "cpu"),
        (lambda f: f["cpu"].pop("physical_cores"), "cpu.physical_cores"),
        (lambda f: f["memory"].update(total_bytes="lots"), "memory.total_bytes"),
        (lambda f: f["gpus"].append({"name": "x"}), "memory_mib"),
    ],
)
def test_bad_facts_are_bad_input(mutate, message):
    host = facts("h100-amx")
    mutate(host)
    with pytest.raises(PlanInputError, match=message):
        plan(host, "Qwen3-30B-A3B", "serve")


def _set(host: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = host
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[int(last) if isinstance(node, list) else last] = value


CC_WANTED = 'a compute capability such as "9.0"'
HUGE = int("9" * 400)
BIG = "9" * 37 + "..."  # how HUGE is shown: cut short
CPULIST_WANTED = 'a CPU list such as "0-15,32" (ids below 8192)'


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("cpu.usable_cpus", 16, f"cpu.usable_cpus must be {CPULIST_WANTED}, got 16"),
        ("cpu.numa_node_cpus", ["0-15"], 'cpu.numa_node_cpus must be an object, got ["0-15"]'),
        ("cpu.numa_node_cpus", {"0": "a"}, f'cpu.numa_node_cpus.0 must be {CPULIST_WANTED}, got "a"'),
        (
            "cpu.numa_node_physical_cores",
            {"0": "x"},
            'cpu.numa_node_physical_cores.0 must be a non-negative integer up to 8192, got "x"',
        ),
        ("cpu.logical_cpus", 4, "cpu.logical_cpus must be at least cpu.physical_cores (16), got 4"),
        ("cpu.isa.amx_tile", "false", 'cpu.isa.amx_tile must be true, false or null, got "false"'),
        ("gpus.0.compute_capability", "7.5x", f'gpus[0].compute_capability must be {CC_WANTED}, got "7.5x"'),
        ("gpus.0.memory_mib", 0, "gpus[0].memory_mib must be a positive integer up to 2^24, got 0"),
        ("gpus.0.memory_mib", -5, "gpus[0].memory_mib must be a positive integer up to 2^24, got -5"),
        ("gpus.0.memory_mib", HUGE, f"gpus[0].memory_mib must be a positive integer up to 2^24, got {BIG}"),
        ("gpus.0.index", HUGE, f"gpus[0].index must be a non-negative integer up to 65536, got {BIG}"),
        ("cpu.logical_cpus", HUGE, f"cpu.logical_cpus must be a positive integer up to 8192, got {BIG}"),
        ("cpu.physical_cores", 8193, "cpu.physical_cores must be a positive integer up to 8192, got 8193"),
        ("cpu.numa_nodes", 1025, "cpu.numa_nodes must be a positive integer up to 1024, got 1025"),
        ("cpu.threads_per_core", 9, "cpu.threads_per_core must be a positive integer up to 8, got 9"),
        ("cpu.online_cpus", "104", 'cpu.online_cpus must be a positive integer up to 8192, got "104"'),
        ("container", 1, "container must be true, false or null, got 1"),
        ("gpus.0", "x", 'gpus[0] must be an object, got "x"'),
        ("gpus.0.name", None, "facts lack gpus[0].name (a string); produce them with `ktinfra facts --json`"),
        ("memory.total_bytes", -5, "memory.total_bytes must be a positive integer up to 2^60, got -5"),
        (
            "memory.total_bytes",
            2**60 + 1,
            f"memory.total_bytes must be a positive integer up to 2^60, got {2**60 + 1}",
        ),
        ("os", "linux", 'os must be an object, got "linux"'),
        ("os.kernel", 6, "os.kernel must be a string, got 6"),
        (
            "disks.0.avail_bytes",
            "5",
            'disks[0].avail_bytes must be a non-negative integer up to 2^64, got "5"',
        ),
        (
            "disks.0.avail_bytes",
            2**64 + 1,
            f"disks[0].avail_bytes must be a non-negative integer up to 2^64, got {2**64 + 1}",
        ),
        ("schema", 99, "not facts schema 1 (`ktinfra facts --json` output): schema is 99"),
        ("schema", None, "not facts schema 1 (`ktinfra facts --json` output): schema is null"),
    ],
)
def test_facts_of_the_wrong_type_name_the_key_and_value(key, value, message, tmp_path):
    host = facts("h100-amx")
    _set(host, key, value)
    with pytest.raises(PlanInputError, match=re.escape(message)):
        plan(host, "Qwen3-30B-A3B", "serve")
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(host))
    with pytest.raises(PlanInputError, match=f"^{re.escape(str(path))}: .*{re.escape(message)}$"):
        load_facts(path)


def test_a_local_model_of_an_unknown_architecture_is_planned_with_a_warning(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(MIXTRAL_8X7B))
    for mode in ("serve", "sft"):
        warnings = plan(facts("h100-amx"), str(tmp_path), mode)["warnings"]
        assert any(w.startswith("architecture mixtral is outside the catalog's") for w in warnings)
    assert plan(facts("h100-amx"), "Qwen3-30B-A3B", "serve")["warnings"] == []


def test_facts_may_leave_what_the_host_did_not_tell_null():
    host = facts("h100-amx")
    host["cpu"].update(model=None, usable_cpus=None, numa_node_cpus=None, numa_nodes=None)
    host["cpu"]["isa"]["avx2"] = None
    host["gpus"][0].update(compute_capability=None)
    host.update(os=None, disks=None)
    assert plan(host, "Qwen3-30B-A3B", "serve")["mode"] == "serve"


def test_bad_mode_model_profile_and_format_are_bad_input():
    host = facts("h100-amx")
    for kwargs, message in [
        ({"model": "Qwen3-30B-A3B", "mode": "train"}, "mode"),
        ({"model": "GPT-5", "mode": "serve"}, "unknown model"),
        ({"model": "Qwen3-30B-A3B", "mode": "serve", "stack": "kt-9"}, "unknown stack profile"),
        ({"model": "Qwen3-30B-A3B", "mode": "serve", "cpu_format": "Q7_0"}, "unknown CPU weight format"),
        ({"model": "Qwen3-30B-A3B", "mode": "sft", "cpu_format": "AMXINT8"}, "applies to serve"),
    ]:
        with pytest.raises(PlanInputError, match=message):
            plan(host, **kwargs)


# --- the command line (real processes: exit codes 0 / 1 / 2) -------------------------------------------
def ktinfra(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True)


def test_cli_feasible_plan_exits_0_with_contract_json():
    proc = ktinfra("plan", "--model", "qwen3-30b-a3b", "--facts", str(FACTS / f"{SEED002}.json"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["serve"]["kt_cpuinfer"] == 8


def test_cli_infeasible_plan_exits_2_and_lists_problems():
    proc = ktinfra("plan", "--model", "DeepSeek-V2-Lite", "--mode", "sft",
                   "--facts", str(FACTS / "xeon8352v-4090-noamx.json"))  # fmt: skip
    assert proc.returncode == 2
    assert "needs AMX" in proc.stdout and "not feasible" in proc.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["--model", "nope"], "unknown model 'nope'"),
        (["--model", "Qwen3-30B-A3B", "--lora", "adapter-without-dir"], "--lora wants NAME=DIR"),
        (
            ["--model", "Qwen3-30B-A3B", "--lora", "style=/a", "--lora", "style =/b"],
            "--lora name 'style' given twice (/a and /b)",
        ),
        (["--model", "Qwen3-30B-A3B", "--from", "/nonexistent"], "not both"),
    ],
)
def test_cli_bad_input_exits_1(args, message):
    proc = ktinfra("plan", "--facts", str(FACTS / "h100-amx.json"), *args)
    assert proc.returncode == 1 and message in proc.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (["--mode", "sft", "--lora", "a=/x"], "--lora applies to --mode serve, not --mode sft"),
        (["--mode", "sft", "--port", "8000"], "--port applies to --mode serve, not --mode sft"),
        (["--mode", "sft", "--host", "0.0.0.0"], "--host applies to --mode serve, not --mode sft"),
        (["--mode", "sft", "--api-key-set"], "--api-key-set applies to --mode serve, not --mode sft"),
        (["--cutoff-len", "512"], "--cutoff-len applies to --mode sft, not --mode serve"),
        (["--mode", "train"], "--mode must be one of serve, sft, not 'train'"),
    ],
)
def test_cli_refuses_flags_the_mode_would_ignore(args, message):
    proc = ktinfra("plan", "--model", "Qwen3-30B-A3B", "--facts", str(FACTS / "h100-amx.json"), *args)
    assert proc.returncode == 1 and proc.stderr.endswith(f": {message}\n") and proc.stderr.count("\n") == 1


def test_cli_mode_is_case_insensitive():
    proc = ktinfra("plan", "--model", "Qwen3-30B-A3B", "--facts", str(FACTS / f"{SEED002}.json"),
                   "--mode", "SFT", "--cutoff-len", "512", "--json")  # fmt: skip
    assert proc.returncode in (0, 2), proc.stderr
    result = json.loads(proc.stdout)
    assert result["mode"] == "sft" and result["sft"]["cutoff_len"] == 512


def test_cli_unreadable_facts_file_exits_1(tmp_path):
    bad = tmp_path / "facts.json"
    bad.write_text("[1, 2")
    proc = ktinfra("plan", "--model", "Qwen3-30B-A3B", "--facts", str(bad))
    assert proc.returncode == 1 and "is not JSON" in proc.stderr
    proc = ktinfra("plan", "--model", "Qwen3-30B-A3B", "--facts", str(tmp_path / "missing.json"))
    assert proc.returncode == 1 and "cannot read facts file" in proc.stderr


def test_cli_from_a_folder_without_capture_files_exits_1_in_one_line(tmp_path):
    proc = ktinfra("plan", "--model", "Qwen3-30B-A3B", "--from", str(tmp_path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"error: --from {tmp_path}: {tmp_path} is not a capture folder" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_cli_models_json_lists_the_catalog_with_sizing():
    proc = ktinfra("models", "--json")
    assert proc.returncode == 0
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    assert {"DeepSeek-V2-Lite", "Qwen3-30B-A3B", "Qwen3-235B-A22B", "DeepSeek-V3", "Kimi-K2"} <= rows.keys()
    assert rows["Qwen3-30B-A3B"]["sizing"]["serve:AMXINT8"]["ram_bytes"] == pytest.approx(32e9, rel=0.05)


def narrow_terminal(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ktinfra", *args]
    return subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "COLUMNS": str(columns)}
    )


def test_cli_sft_plan_shows_each_nested_kt_setting_whole_on_an_80_column_terminal():
    proc = narrow_terminal("plan", "--model", "Qwen3-30B-A3B", "--mode", "sft",
                           "--facts", str(FACTS / f"{SEED002}.json"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout and max(map(len, proc.stdout.splitlines())) <= 80
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in proc.stdout.splitlines()
            if line.startswith("│ kt.")}  # fmt: skip
    assert rows["kt.kt_config.kt_backend"] == "AMXBF16"
    assert [value for name, value in rows.items() if name.startswith("kt.kt_config.kt_num_thr")] == ["8"]


def test_cli_models_table_keeps_every_number_whole_on_an_80_column_terminal():
    proc = narrow_terminal("models")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in proc.stdout
    kimi_sft = next(line for line in lines if "sft:BF16" in line and "2114" in line)
    assert kimi_sft.rstrip("│ ").split()[-1] == "3331"  # Kimi-K2's SFT disk GB, not cut
    assert "in GB (1e9 bytes)" in proc.stdout


@pytest.mark.parametrize("columns", [77, 70, 50, 30])
def test_cli_models_on_a_terminal_too_narrow_for_the_table_lists_every_estimate_whole(columns):
    """Before: at 70 columns rich cropped the disk column, at 50 the names and numbers became '…'."""
    proc = narrow_terminal("models", columns=columns)
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout and "┃" not in proc.stdout
    rows = json.loads(ktinfra("models", "--json").stdout)
    for row in rows:
        assert f"{row['name']} (" in proc.stdout
        for use, est in row["sizing"].items():
            line = (
                f"  {use}: GPU {est['vram_bytes'] / 1e9:.1f}, RAM {est['ram_bytes'] / 1e9:.0f}, "
                f"disk {est['disk_bytes'] / 1e9:.0f}"
            )
            assert line in proc.stdout.splitlines()


def test_fp8_checkpoint_on_an_ampere_gpu_is_warned_about():
    host = facts("h100-amx")
    host["gpus"][0].update(name="NVIDIA A100-SXM4-80GB", compute_capability="8.0")
    warnings = plan(host, "DeepSeek-V2-Lite", "serve")["warnings"]
    assert warnings == []
    host["memory"]["total_bytes"] = 2 * 10**12
    host["disks"][0]["avail_bytes"] = 3 * 10**12
    warnings = plan(host, "Kimi-K2", "serve")["warnings"]
    assert any("FP8 checkpoint on compute capability < 8.9" in w for w in warnings)


@pytest.mark.parametrize(
    "physical,logical,want",
    [(16, 16, 14), (8, 16, 8), (15, 16, 14), (1, 1, 1), (2, 2, 1), (104, 208, 104)],
)
def test_cpu_workers_leave_two_logical_cpus_for_the_submitting_and_scheduler_threads(physical, logical, want):
    # The H100 measurement (docs/results/2026-11-21-h100-amx): workers on all 16 vCPUs decode at 7% of
    # the best; hyperthread siblings left over take that work instead.
    from ktinfra.plan.host import cpu_worker_threads

    host = facts("h100-amx")
    host["cpu"].update(physical_cores=physical, logical_cpus=logical)
    assert cpu_worker_threads(host)[0] == want


def test_sft_plan_states_allocated_peak_and_the_runtime_it_reserves():
    result = plan(facts(SEED002), "Qwen3-30B-A3B", "sft")
    reason = result["reasons"]["vram_bytes"]
    assert reason.startswith(f"{result['requirements']['vram_bytes'] / GB:.1f} GB allocated at peak")
    runtime = (
        result["requirements_breakdown"]["cuda_runtime"] + result["requirements_breakdown"]["allocator_cache"]
    )
    assert f"+ {runtime / GB:.1f} GB per GPU of CUDA context and allocator cache" in reason


def test_sft_plan_counts_cuda_context_and_allocator_cache_against_the_gpu():
    # A GPU that holds the allocated peak but not the context and the allocator's cache is too small:
    # the H100 run used 10.5 GiB on the device for a 6.9 GiB allocated peak (Qwen3-30B-A3B, 2048 tokens).
    from ktinfra import catalog, sizing

    est = sizing.sft(catalog.resolve("Qwen3-30B-A3B"), cutoff_len=2048)
    host = facts(SEED002)
    host["gpus"] = host["gpus"][:1]
    host["gpus"][0]["memory_mib"] = int((est.vram_bytes + 0.5 * GB) / 2**20)
    result = plan(host, "Qwen3-30B-A3B", "sft", cutoff_len=2048)
    assert not result["feasible"]
    assert any("GPU memory per GPU at cutoff_len 2048" in p for p in result["problems"])
    host["gpus"][0]["memory_mib"] = int((est.vram_bytes + sizing.sft_gpu_runtime_bytes(est)) / 2**20) + 64
    assert plan(host, "Qwen3-30B-A3B", "sft", cutoff_len=2048)["sft"]["cutoff_len"] == 2048


def test_sft_accumulation_counts_the_data_parallel_ranks():
    """Before: 4 GPUs each stepping 4 x 2 took 32 samples per step while the reason said 8."""
    result = plan(facts("dual-spr-2xnuma-4xl40s"), "Qwen3-30B-A3B", "sft")
    sft = result["sft"]
    assert (sft["launcher"]["num_processes"], sft["per_device_train_batch_size"]) == (4, 4)
    assert sft["gradient_accumulation_steps"] == 1
    assert result["reasons"]["per_device_train_batch_size"].startswith(
        "4 x 1 gradient accumulation x 4 data-parallel GPUs = 16 samples per step"
    )
    one = plan(facts("h100-amx"), "Qwen3-30B-A3B", "sft")
    assert one["reasons"]["per_device_train_batch_size"].startswith("4 x 2 gradient accumulation = 8 samples")


def test_an_fp16_checkpoint_served_in_bf16_gets_no_phantom_copy(tmp_path):
    """The BF16 backend reads fp16/fp32 in place; only an FP8 checkpoint needs fp8_cast_bf16's copy."""
    model = _local_copy(tmp_path, "Qwen3-30B-A3B", torch_dtype="float16")
    breakdown = plan(facts("h100-amx"), model, "serve", cpu_format="BF16")["requirements_breakdown"]
    assert "bf16_conversion" not in breakdown and breakdown["download"] == 0
