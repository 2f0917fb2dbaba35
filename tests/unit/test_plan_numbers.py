"""The numbers a plan shows agree with each other: reasons that add up, the headline and the VRAM check,
`ktinfra models` and `ktinfra plan`, and the LoRA rule with the prefill threshold."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ktinfra import catalog, sizing
from ktinfra.commands.models import _rows
from ktinfra.plan import formats
from ktinfra.planner import load_facts, plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GB = 1e9


def facts(name: str) -> dict:
    return load_facts(FIXTURES / "facts" / f"{name}.json")


def small_gpu() -> dict:
    host = facts("h100-amx")
    host["gpus"][0].update(name="NVIDIA RTX A4000", memory_mib=16376, compute_capability="8.6")
    return host


def numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"(\d+(?:\.\d)?) GB", text)]


# --- #4 LoRA and the layerwise prefill threshold -------------------------------------------------------
def test_serving_a_lora_gives_no_gpu_prefill_threshold_and_says_why():
    host = facts("h100-amx")  # native BF16 (the disk cannot hold INT8); the whole model fits the GPU
    result = plan(host, "Qwen3-30B-A3B", "serve", lora={"style": "/data/lora"})
    assert result["serve"]["kt_num_gpu_experts"] == 0
    assert result["serve"]["kt_gpu_prefill_token_threshold"] is None
    reason = result["reasons"]["kt_gpu_prefill_token_threshold"]
    assert "LoRA" in reason and "every expert is on the GPU" not in reason


# --- #5 kt_num_gpu_experts: the reason's arithmetic ----------------------------------------------------
def test_gpu_expert_reason_counts_the_memory_held_for_layerwise_prefill():
    result = plan(facts("dual-spr-2xnuma-4xl40s"), "DeepSeek-V3", "serve", cpu_format="FP8")
    assert result["serve"]["kt_gpu_prefill_token_threshold"] == 2048
    reason = result["reasons"]["kt_num_gpu_experts"]
    static, weights, kv, held, left = numbers(reason.split(";")[0])
    assert "held for layerwise prefill" in reason
    # numbers of 100 GB and more are printed whole: each is within 0.5 GB of the value used
    assert static - weights - kv - held == pytest.approx(left, abs=1.0)


def test_gpu_expert_reason_never_cuts_more_than_the_whole_kv_budget():
    reason = plan(small_gpu(), "Qwen3-235B-A22B", "serve")["reasons"]["kt_num_gpu_experts"]
    assert reason.startswith("0 per MoE layer") and " short" in reason
    for cut, budget in re.findall(r"would cut (\d+\.\d) GB from the (\d+\.\d) GB KV budget", reason):
        assert float(cut) <= float(budget)
    assert "beyond the whole 0.8 GB KV budget" in reason


def test_seed002_gpu_expert_reason_still_prices_one_more_expert_in_kv():
    reason = plan(facts("seed002-autodl-6430-4090"), "Qwen3-30B-A3B", "serve")["reasons"][
        "kt_num_gpu_experts"
    ]
    assert "32 would cut 0.3 GB from the 6.4 GB KV budget" in reason


# --- #6 the headline shows what the VRAM check needs ---------------------------------------------------
def human(*args: str) -> str:
    command = [sys.executable, "-m", "ktinfra", "plan", *args]
    return subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"}
    ).stdout


@pytest.mark.parametrize("mode,unit", [("serve", "GPU memory ("), ("sft", "GPU memory per GPU")])
def test_headline_gpu_memory_is_the_number_the_problem_checks(tmp_path, mode, unit):
    path = tmp_path / "small.json"
    path.write_text(json.dumps(small_gpu()))
    out = human("-m", "Qwen3-235B-A22B", "--mode", mode, "--facts", str(path))
    headline = next(line for line in out.splitlines() if line.startswith("needs "))
    problem = next(line for line in out.splitlines() if line.startswith("problem: needs") and "GPU" in line)
    needed = re.match(r"needs (\d+\.\d) GB " + re.escape(unit), headline)
    assert needed, headline
    assert problem.startswith(f"problem: needs {needed.group(1)} GB GPU memory")


# --- #7 `ktinfra models` sizes each format from the checkpoint `ktinfra plan` serves from --------------
@pytest.mark.parametrize("model", ["DeepSeek-V3", "Kimi-K2", "Qwen3-30B-A3B"])
def test_models_rows_are_what_plan_would_need(model):
    arch = catalog.resolve(model)
    row = next(r for r in _rows() if r["name"] == arch.name)
    served = {use: estimate for use, estimate in row["sizing"].items() if use.startswith("serve:")}
    # the formats every MoE model is served in: without rows for them the loop below would compare nothing
    assert {"serve:AMXINT8", "serve:AMXINT4", "serve:BF16"} <= set(served), list(row["sizing"])
    for use, estimate in served.items():
        fmt = sizing.cpu_format(use.removeprefix("serve:"))
        assert estimate == formats.estimate(arch, fmt).to_dict(), use


def test_bf16_row_of_an_fp8_model_matches_the_plan():
    host = facts("dual-spr-2xnuma-4xl40s")
    host["memory"]["total_bytes"] = 4 * 10**12
    result = plan(host, "DeepSeek-V3", "serve", cpu_format="BF16")
    row = next(r for r in _rows() if r["name"] == "DeepSeek-V3")["sizing"]["serve:BF16"]
    assert [row[k] for k in ("ram_bytes", "disk_bytes")] == [
        result["requirements"][k] for k in ("ram_bytes", "disk_bytes")
    ]
    # the catalog row is one GPU; at TP 4 each rank holds its own copy of the MLA latent KV and of the
    # replicated weights (routers, q_a/kv_a projections)
    arch = catalog.resolve("DeepSeek-V3")
    one_copy = sizing.kv_bytes_per_token(arch) * sizing.SERVE_MIN_KV_TOKENS
    copies = int(sizing.checkpoint_bytes(arch, sizing.tp_extra_params(arch, 4), "bf16"))
    assert result["serve"]["tensor_parallel_size"] == 4
    assert result["requirements"]["vram_bytes"] == row["vram_bytes"] + 3 * one_copy + copies
