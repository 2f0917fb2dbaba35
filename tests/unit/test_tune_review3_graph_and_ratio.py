"""Two gaps a review of `ktinfra tune` found. --cuda-graph-max-bs was the next power of two above the largest
batch run without a graph, also above the scheduler's --max-running-requests, which no batch can pass (a cap
of 200 gave 256). An OOM on a capped KV pool with --kt-gpu-experts-ratio set (sglang-kt then ignores
--kt-num-gpu-experts) got no advice to move experts off the GPU."""

from __future__ import annotations

import pytest
from test_tune_bounds import CAPPED, DECODE_OOM, advise, args

RUNNING_CAP = (
    "[2025-11-11 13:01:09 TP0] max_total_num_tokens=1522816, chunked_prefill_size=4096, "
    "max_prefill_tokens=16384, max_running_requests={cap}, context_len=32768, available_gpu_mem=6.00 GB"
)
NO_GRAPH = (
    "[2025-11-11 13:02:{s:02d} TP0] Decode batch. #running-req: {n}, #token: 9000, token usage: 0.50, "
    "cuda graph: False, gen throughput (token/s): 300.00, #queue-req: 0,"
)


def graph_rec(cap: int, running: int) -> dict:
    decodes = [NO_GRAPH.format(s=s, n=running) for s in range(10)]
    changes, _ = advise(args(cuda_graph_max_bs=160), RUNNING_CAP.format(cap=cap), *decodes)
    return changes["--cuda-graph-max-bs"]


def test_graph_size_is_not_suggested_above_the_running_requests_cap():
    rec = graph_rec(cap=200, running=200)
    assert (rec["current"], rec["suggested"]) == (160, 200)
    assert "not above 200: --max-running-requests caps the batch" in rec["reason"]


def test_graph_size_below_the_cap_is_the_next_power_of_two():
    rec = graph_rec(cap=4096, running=200)
    assert (rec["current"], rec["suggested"]) == (160, 256)
    assert "caps the batch" not in rec["reason"]


@pytest.mark.parametrize(("ratio", "halved"), [("0.5", 0.25), ("0.25", 0.125), ("1.0", 0.5)])
def test_an_oom_on_a_capped_pool_halves_the_experts_ratio(ratio, halved):
    line = args(max_total_tokens=60000, kt_num_gpu_experts=32, kt_gpu_experts_ratio=ratio)
    changes, _ = advise(line, CAPPED.format(free=6.0), *DECODE_OOM)
    rec = changes["--kt-gpu-experts-ratio"]
    assert (rec["current"], rec["suggested"]) == (float(ratio), halved)
    assert "sglang-kt then ignores --kt-num-gpu-experts" in rec["reason"]
    assert rec["evidence"] == [DECODE_OOM[-1]]
    assert "--kt-num-gpu-experts" not in changes  # the count is ignored while the ratio is set


@pytest.mark.parametrize(
    "line",
    [
        args(max_total_tokens=60000, kt_num_gpu_experts=32, kt_gpu_experts_ratio="0.0"),  # all on the CPU
        args(max_total_tokens="None", kt_num_gpu_experts=32, kt_gpu_experts_ratio="0.5"),  # pool not capped
    ],
)
def test_no_ratio_change_without_gpu_experts_or_a_cap(line):
    changes, _ = advise(line, CAPPED.format(free=6.0), *DECODE_OOM)
    assert "--kt-gpu-experts-ratio" not in changes


def graph_rec_with(cap: int, running: int, **extra) -> dict:
    decodes = [NO_GRAPH.format(s=s, n=running) for s in range(10)]
    changes, _ = advise(args(cuda_graph_max_bs=16, **extra), RUNNING_CAP.format(cap=cap), *decodes)
    return changes["--cuda-graph-max-bs"]


@pytest.mark.parametrize(
    ("cap", "extra", "suggested", "below"),
    [
        (50, {}, 56, 48),  # 16..256 step 8: a cap of 50 stops the list at 48
        (300, {}, 304, 288),  # 272..496 step 16
        (50, {"speculative_algorithm": "'EAGLE'"}, 52, 48),  # the spec-decoding list: 40..64 step 4
    ],
)
def test_a_cap_off_sglang_s_capture_sizes_gets_the_size_that_covers_it(cap, extra, suggested, below):
    """--cuda-graph-max-bs 50 captures [..., 40, 48] (server_args._generate_cuda_graph_batch_sizes keeps the
    sizes up to it) and cuda_graph_runner adds the pool's size (50) only when the largest is above it: the
    batches of 49 and 50 ran without a graph after following the old advice. 56 captures [..., 48, 50]."""
    rec = graph_rec_with(cap=cap, running=cap, **extra)
    assert (rec["current"], rec["suggested"]) == (16, suggested)
    assert f"{cap} would stop at {below}, batches of {below + 1} to {cap} without a graph" in rec["reason"]


@pytest.mark.parametrize(("cap", "extra"), [(200, {}), (50, {"disable_cuda_graph_padding": "True"})])
def test_a_cap_among_the_capture_sizes_is_the_suggestion(cap, extra):
    rec = graph_rec_with(cap=cap, running=cap, **extra)
    assert (rec["current"], rec["suggested"]) == (16, cap)
    assert f"not above {cap}: --max-running-requests caps the batch" in rec["reason"]
