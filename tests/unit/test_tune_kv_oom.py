"""KV cache OOMs as current SGLang logs them. Since kvcache-ai/sglang #11313 (2025-10, "Separate allocation
logic from scheduler") a KV pool of page size 1, the default, fails in mem_cache/common.py alloc_token_slots
with `Out of memory. Try to lower your batch size.` for prefill and decode alike; only paged pools still say
`Prefill out of memory` / `Decode out of memory`. The step is in the traceback that follows the radix tree:
`alloc_for_extend` or `alloc_for_decode`. retract_decode raises `ValueError: Out of memory even after
retracting all other requests in the decode batch.` Before, tune matched none of these: a server that died of
a KV OOM read "nothing to fix"."""

from __future__ import annotations

from test_tune import oom_counts

from ktinfra import tune

ARGS = (
    "[2026-01-10 10:00:00] server_args=ServerArgs(model_path='/data/models/Qwen3-30B-A3B', "
    "mem_fraction_static=0.85, chunked_prefill_size=8192, max_running_requests=48, page_size=1, "
    "kt_num_gpu_experts=0, random_seed=7)"
)
CONFIG = (
    "[2026-01-10 10:01:00 TP0] max_total_num_tokens=120000, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=48, context_len=40960, available_gpu_mem=6.10 GB"
)
DECODE = (
    "[2026-01-10 10:05:{s:02d} TP0] Decode batch, #running-req: 48, #token: 119000, token usage: 0.99, "
    "cuda graph: True, gen throughput (token/s): 410.00, #queue-req: 3"
)
RADIX = [
    f"  {64 * i} [{i}, {i + 1}, {i + 2}] r=1" for i in range(50)
]  # tree_cache.pretty_print(), a node a line
ALLOC_ERROR = [
    "[2026-01-10 10:06:00 TP0] Out of memory. Try to lower your batch size.",
    "Try to allocate {n} tokens.",
    "Available tokens: 310, evictable tokens: 0",
]
FRAMES_TOP = [
    "[2026-01-10 10:06:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 3260, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 1200, in event_loop_overlap',
    "    batch = self.get_next_batch_to_run()",
]
PREFILL_FRAMES = [
    '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2250, in get_new_batch_prefill',
    "    new_batch.prepare_for_extend()",
    '  File "/opt/sglang/python/sglang/srt/managers/schedule_batch.py", line 1532, in prepare_for_extend',
    "    out_cache_loc, req_pool_indices_tensor, req_pool_indices = alloc_for_extend(",
    '  File "/opt/sglang/python/sglang/srt/mem_cache/common.py", line 359, in alloc_for_extend',
    "    out_cache_loc = alloc_token_slots(batch.tree_cache, batch.extend_num_tokens)",
]
DECODE_FRAMES = [
    '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2140, in update_running_batch',
    "    batch.prepare_for_decode()",
    '  File "/opt/sglang/python/sglang/srt/managers/schedule_batch.py", line 2027, in prepare_for_decode',
    "    self.out_cache_loc = alloc_for_decode(self, token_per_req=1)",
    '  File "/opt/sglang/python/sglang/srt/mem_cache/common.py", line 437, in alloc_for_decode',
    "    out_cache_loc = alloc_token_slots(batch.tree_cache, bs * token_per_req)",
]
FRAMES_END = [
    '  File "/opt/sglang/python/sglang/srt/mem_cache/common.py", line 224, in alloc_token_slots',
    "    raise RuntimeError(error_msg)",
    "RuntimeError: Out of memory. Try to lower your batch size.",
    "Try to allocate {n} tokens.",
    "Available tokens: 310, evictable tokens: 0",
]


def crash(frames: list[str], n: int) -> list[str]:
    end = [line.format(n=n) for line in FRAMES_END]
    return [*(line.format(n=n) for line in ALLOC_ERROR), *RADIX, *FRAMES_TOP, *frames, *end]


def advise(lines: list[str]) -> dict:
    return tune.advise(tune.parse_text("\n".join(lines) + "\n"))


def by_param(result: dict) -> dict:
    return {r["parameter"]: (r["current"], r["suggested"]) for r in result["recommendations"]}


def test_a_page_size_1_prefill_oom_is_one_prefill_oom():
    result = advise([ARGS, CONFIG, *(DECODE.format(s=s) for s in range(3)), *crash(PREFILL_FRAMES, 8192)])
    assert result["summary"]["oom_errors"] == oom_counts(prefill=1)
    assert by_param(result)["--chunked-prefill-size"] == (8192, 4096)
    assert "--mem-fraction-static" not in by_param(result)  # not an unplaced OOM as well
    assert result["recommendations"][0]["evidence"][0].endswith(
        "Out of memory. Try to lower your batch size."
    )


def test_a_page_size_1_decode_oom_halves_the_running_requests():
    result = advise([ARGS, CONFIG, *(DECODE.format(s=s) for s in range(3)), *crash(DECODE_FRAMES, 48)])
    assert result["summary"]["oom_errors"] == oom_counts(decode=1)
    assert by_param(result) == {"--max-running-requests": (48, 24)}


def test_an_oom_that_retraction_could_not_avoid_is_a_decode_oom():
    lines = [
        ARGS,
        CONFIG,
        DECODE.format(s=1),
        *FRAMES_TOP,
        '  File "/opt/sglang/python/sglang/srt/managers/schedule_batch.py", line 1915, in retract_decode',
        "    raise ValueError(",
        "ValueError: Out of memory even after retracting all other requests in the decode batch.",
    ]
    result = advise(lines)
    assert result["summary"]["oom_errors"]["decode"] == 1
    assert by_param(result) == {"--max-running-requests": (48, 24)}


def test_the_allocator_error_without_its_traceback_is_still_an_oom():
    # a log cut after the allocator's lines (journalctl -n): the step is unknown, the OOM is not lost
    result = advise([ARGS, CONFIG, DECODE.format(s=1), *(line.format(n=64) for line in ALLOC_ERROR)])
    assert result["summary"]["oom_errors"]["unknown"] == 1
    assert by_param(result) == {"--mem-fraction-static": (0.85, 0.8)}
