"""SFT plan review 2: the legacy KT MoE's token limit per micro-batch, and cutoff_len given to plan() itself.

The legacy AMX SFT MoE (ktransformers v0.4.2 kt-sft operators/experts.py, KSFTExpertsCPU) sizes its buffers
for chunk_size tokens (SFT_AMX_MOEConfig max_len = max(generate_cuda_graphs(chunk_size))) and takes the whole
micro-batch, batch x padded length, in one forward: more tokens write past its buffers
(csrc/ktransformers_ext/operators/amx/sft_moe.hpp, m_local_pos_ has max_len rows). generate_cuda_graphs
asserts chunk_size <= 1024 or a multiple of 1024."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktinfra.planner import PlanInputError, load_facts, plan

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"


def _legacy(fixture: str, model: str, cutoff: int | None) -> dict:
    return plan(
        load_facts(str(FACTS / f"{fixture}.json")), model, "sft", stack="kt-0.4-autodl", cutoff_len=cutoff
    )


def _padded(tokens: int) -> int:
    return -(-tokens // 8) * 8  # LLaMA-Factory pads a training batch to a multiple of 8


@pytest.mark.parametrize(
    ("fixture", "model", "cutoff"),
    [
        ("h100-amx", "Qwen3-30B-A3B", 4096),  # old: batch 4, 16384 tokens in a chunk_size of 8192
        ("h100-amx", "Qwen3-30B-A3B", 8192),  # old: batch 2
        ("h100-amx", "DeepSeek-V2-Lite", 3000),  # old: batch 4 of 3000 tokens
        ("dual-spr-2xnuma-4xl40s", "Qwen3-30B-A3B", 4096),
        ("h100-amx", "Qwen3-30B-A3B", None),
        ("h100-amx", "DeepSeek-V2-Lite", None),
    ],
)
def test_a_legacy_micro_batch_fits_the_chunk_size(fixture, model, cutoff):
    sft = _legacy(fixture, model, cutoff)["sft"]
    chunk = sft["kt"]["chunk_size"]
    assert sft["per_device_train_batch_size"] * _padded(sft["cutoff_len"]) <= chunk
    assert chunk == 8192  # the examples' value holds every one of these


@pytest.mark.parametrize(("cutoff", "chunk"), [(8193, 9216), (16384, 16384), (20000, 20480)])
def test_a_legacy_sample_longer_than_the_chunk_size_raises_it(cutoff, chunk):
    result = _legacy("h100-amx", "DeepSeek-V2-Lite", cutoff)
    sft = result["sft"]
    assert sft["per_device_train_batch_size"] == 1
    assert sft["kt"]["chunk_size"] == chunk  # a multiple of 1024, as generate_cuda_graphs asserts
    assert f"chunk_size {chunk} (the examples' 8192 raised" in result["reasons"]["kt"]


def test_the_current_stack_keeps_its_batch():
    # kt_kernel's buffers follow LLaMA-Factory's kt_model_max_length (cutoff x batch): no chunk_size there
    result = plan(load_facts(str(FACTS / "h100-amx.json")), "DeepSeek-V2-Lite", "sft", cutoff_len=4096)
    assert "chunk_size" not in result["sft"]["kt"]
    assert result["sft"]["per_device_train_batch_size"] == 4


@pytest.mark.parametrize("bad", [-5, 0, 63, "2048", 1.5, True])
def test_a_bad_cutoff_len_is_refused_by_plan(bad):
    # the CLI takes --cutoff-len >= 64; plan() took 0 as "not given", -5 and 1.5 into the recipe, "abc" to a
    # TypeError
    with pytest.raises(PlanInputError, match="cutoff_len must be an integer of at least 64"):
        plan(load_facts(str(FACTS / "h100-amx.json")), "DeepSeek-V2-Lite", "sft", cutoff_len=bad)


def test_the_batch_reason_names_the_chunk_size_when_that_cut_it():
    result = _legacy("h100-amx", "DeepSeek-V2-Lite", 8192)  # VRAM would take batch 2 (old plan: batch 2)
    assert result["sft"]["per_device_train_batch_size"] == 1
    why = result["reasons"]["per_device_train_batch_size"]
    assert why.endswith("no larger batch: 2 x 8192 tokens would pass chunk_size 8192")
    default = _legacy("h100-amx", "DeepSeek-V2-Lite", None)  # 4 x 2048: the largest batch tried
    assert default["reasons"]["per_device_train_batch_size"].endswith(
        "VRAM has room for a larger micro-batch"
    )


def test_a_cutoff_len_for_a_serve_plan_is_refused_by_plan():
    """The CLI refuses --cutoff-len with --mode serve; plan() called from Python dropped it without a word."""
    with pytest.raises(PlanInputError, match="--cutoff-len applies to --mode sft, not --mode serve"):
        plan(load_facts(str(FACTS / "h100-amx.json")), "Qwen3-30B-A3B", "serve", cutoff_len=2048)
    assert plan(load_facts(str(FACTS / "h100-amx.json")), "Qwen3-30B-A3B", "serve", cutoff_len=None)[
        "feasible"
    ]
