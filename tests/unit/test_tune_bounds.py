"""The advisor never moves a value against its own reason, and never lists a change that changes nothing:
where a rule's floor or clamp would do so (a chunk already below 512, a fraction outside 0.5-0.95, a
conservativeness already above 1.3) it gives advice without a value. An OOM just after start-up is not
a prefill OOM because the start-up lines mention chunked_prefill_size."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ktinfra import tune

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
ARGS = (LOGS / "healthy.log").read_text().splitlines()[0]  # a real-format server_args line
CONFIG = (
    "[2025-11-11 13:01:09 TP0] max_total_num_tokens=1522816, chunked_prefill_size={chunk}, "
    "max_prefill_tokens=16384, max_running_requests=4096, context_len=32768, available_gpu_mem={free:.2f} GB"
)
RETRACT = (
    "[2025-11-11 13:02:{s:02d} TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
    "#new_token_ratio: 0.9998 -> 1.0000"
)


def args(**values) -> str:
    """The real-format line with VALUES set; a key the line lacks (a newer server arg) is added at its end."""
    line = ARGS
    for key, value in values.items():
        line, count = re.subn(rf"\b{key}=[^,)]*", f"{key}={value}", line)
        assert count <= 1, key
        if not count:
            assert line.endswith(")"), line[-40:]
            line = f"{line[:-1]}, {key}={value})"
    return line


def advise(*lines: str) -> tuple[dict, dict]:
    result = tune.advise(tune.parse_text("\n".join(lines) + "\n"))
    changes = {r["parameter"]: r for r in result["recommendations"]}
    advice = {r["parameter"]: r for r in result["advice"]}
    return changes, advice


def assert_no_contradiction(changes: dict) -> None:
    for rec in changes.values():
        assert rec["suggested"] != rec["current"], rec


def test_a_prefill_oom_never_raises_the_chunk():
    changes, advice = advise(
        args(chunked_prefill_size=256),
        CONFIG.format(chunk=256, free=6.0),
        "[2025-11-11 13:02:00 TP0] Prefill out of memory. Try to lower your batch size.",
    )
    assert "--chunked-prefill-size" not in changes  # used to say 256 -> 512
    assert "256 is already below the 512" in advice["--chunked-prefill-size"]["reason"]
    assert_no_contradiction(changes)


@pytest.mark.parametrize(
    ("fraction", "free", "word"),
    [(0.4, 2.0, "below"), (0.97, 12.0, "above"), (0.95, 12.0, "above")],
)
def test_mem_fraction_outside_the_clamp_is_advice_not_a_backwards_change(fraction, free, word):
    changes, advice = advise(args(mem_fraction_static=fraction), CONFIG.format(chunk=4096, free=free))
    assert "--mem-fraction-static" not in changes  # 0.4 -> 0.5 ("shrink"), 0.97 -> 0.95 ("give the rest")
    assert f"{fraction:g} is already {word} the" in advice["--mem-fraction-static"]["reason"]


def test_mem_fraction_inside_the_clamp_still_moves():
    changes, _ = advise(args(mem_fraction_static=0.8), CONFIG.format(chunk=4096, free=2.0))
    assert changes["--mem-fraction-static"]["suggested"] == 0.77


def test_conservativeness_already_high_is_advice_not_a_no_op_change():
    retracts = [RETRACT.format(s=s) for s in range(10, 60, 10)]
    changes, advice = advise(
        args(schedule_conservativeness=2.0), CONFIG.format(chunk=4096, free=6.0), *retracts
    )
    assert "--schedule-conservativeness" not in changes  # used to be "2.0 -> 2.0", counted as a change
    assert "--schedule-conservativeness" in advice
    changes, _ = advise(args(schedule_conservativeness=1.0), CONFIG.format(chunk=4096, free=6.0), *retracts)
    assert changes["--schedule-conservativeness"]["suggested"] == 1.3


def test_an_oom_while_loading_is_not_called_a_prefill_oom():
    changes, _ = advise(
        args(),
        "[2025-11-11 13:00:50 TP0] Load weight begin. avail mem=78.00 GB",
        "[2025-11-11 13:00:55 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "model_runner.py", line 300, in load_model',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    )
    log = tune.parse_text("\n".join([args(), "torch.OutOfMemoryError: CUDA out of memory."]) + "\n")
    assert [o.phase for o in log.ooms] == ["unknown"]  # the server_args line holds chunked_prefill_size=
    assert "--chunked-prefill-size" not in changes


DECODE = (
    "[2025-11-11 {h:02d}:{m:02d}:00 TP0] Decode batch. #running-req: 8, #token: 9000, token usage: 0.50, "
    "cuda graph: True, gen throughput (token/s): 300.00, #queue-req: 0,"
)


def _retract_at(h: int, m: int, s: int) -> str:
    return RETRACT.replace("13:02:{s:02d}", f"{h:02d}:{m:02d}:{s:02d}")


def test_a_burst_of_retractions_in_a_long_log_is_frequent():
    """30 retractions in one minute of a 4-hour log: the whole-log average (0.125/min) hid them."""
    burst = [_retract_at(14, 0, s) for s in range(0, 60, 2)]
    changes, _ = advise(args(), DECODE.format(h=12, m=0), *burst, DECODE.format(h=16, m=0))
    rec = changes["--schedule-conservativeness"]
    assert rec["suggested"] == 1.3
    assert "6.0/min at the busiest" in rec["reason"]  # 30 in the busiest 5 minutes


def test_retractions_hours_apart_are_not_frequent():
    spread = [_retract_at(h, 30, 0) for h in (12, 13, 14, 15)]
    changes, advice = advise(args(), DECODE.format(h=12, m=0), *spread, DECODE.format(h=16, m=0))
    assert "--schedule-conservativeness" not in changes
    assert "--schedule-conservativeness" not in advice


GRAPH = (
    "[2025-11-11 13:02:{s:02d} TP0] Decode batch. #running-req: 40, #token: 9000, token usage: {u:.2f}, "
    "cuda graph: {g}, gen throughput (token/s): 300.00, #queue-req: 0,"
)
CAPPED = (
    "[2025-11-11 13:01:09 TP0] max_total_num_tokens=60000, chunked_prefill_size=4096, "
    "max_prefill_tokens=16384, max_running_requests=32, context_len=32768, available_gpu_mem={free:.2f} GB"
)
DECODE_OOM = (
    "[2025-11-11 13:03:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "scheduler.py", line 900, in forward_decode',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
)


def test_an_oom_never_raises_the_static_pool():
    """Memory free at start-up was not free under load: a prefill OOM with 12 GB free said 0.8 -> 0.82."""
    changes, _ = advise(
        args(mem_fraction_static=0.8),
        CONFIG.format(chunk=8192, free=12.0),
        "[2025-11-11 13:02:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "model_runner.py", line 1800, in forward_extend',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB",
    )
    assert changes["--chunked-prefill-size"]["suggested"] == 4096
    assert "--mem-fraction-static" not in changes


def test_gpu_experts_are_halved_after_an_oom_only_when_the_pool_is_capped():
    uncapped, _ = advise(args(mem_fraction_static=0.8), CONFIG.format(chunk=4096, free=3.0), *DECODE_OOM)
    assert "--kt-num-gpu-experts" not in uncapped
    capped, _ = advise(args(max_total_tokens=60000), CAPPED.format(free=3.0), *DECODE_OOM)
    assert (capped["--kt-num-gpu-experts"]["current"], capped["--kt-num-gpu-experts"]["suggested"]) == (
        32,
        16,
    )


def test_an_unfilled_uncapped_pool_gives_experts_its_memory_once():
    """Free memory after start-up stays total x (1 - mem_fraction_static) whatever the expert count, so the
    sign is the pool's usage; raising the fraction in the same run would claim the same memory twice."""
    decodes = [GRAPH.format(s=s, u=0.3, g="True") for s in range(10, 50, 10)]  # 40 running each
    at_cap = CONFIG.format(chunk=4096, free=18.0).replace(
        "max_running_requests=4096", "max_running_requests=40"
    )
    changes, _ = advise(args(mem_fraction_static=0.8), at_cap, *decodes)
    experts = changes["--kt-num-gpu-experts"]
    assert (experts["current"], experts["suggested"]) == (32, 64)
    assert "cap of 40 and the KV pool never went above 0.30" in experts["reason"]
    assert "--mem-fraction-static" not in changes
    # below the cap low usage is a light load (an idle client), not a pool too big for the server
    changes, _ = advise(args(mem_fraction_static=0.8), CONFIG.format(chunk=4096, free=18.0), *decodes)
    assert "--kt-num-gpu-experts" not in changes
    busy = [GRAPH.format(s=s, u=0.95, g="True") for s in range(10, 50, 10)]
    changes, _ = advise(args(mem_fraction_static=0.8), at_cap, *busy)
    assert "--kt-num-gpu-experts" not in changes
    assert changes["--mem-fraction-static"]["suggested"] > 0.8


def test_spare_memory_held_for_the_layerwise_prefill_is_no_room_for_experts():
    capped_args = args(max_total_tokens=60000, kt_gpu_prefill_token_threshold=4096)
    changes, advice = advise(capped_args, CAPPED.format(free=20.0))
    assert "--kt-num-gpu-experts" not in changes
    assert (
        "--max-total-tokens" not in changes
        and "layerwise GPU prefill" in advice["--max-total-tokens"]["reason"]
    )
    changes, _ = advise(args(max_total_tokens=60000), CAPPED.format(free=20.0))
    assert changes["--kt-num-gpu-experts"]["suggested"] == 64
    assert "--max-total-tokens" not in changes  # the experts take it


def test_an_experts_ratio_makes_the_count_advice_only():
    decodes = [GRAPH.format(s=s, u=0.3, g="True") for s in range(10, 50, 10)]
    changes, advice = advise(args(kt_gpu_experts_ratio=0.25), CONFIG.format(chunk=4096, free=6.0), *decodes)
    assert "--kt-num-gpu-experts" not in changes
    assert "ignores --kt-num-gpu-experts" in advice["--kt-num-gpu-experts"]["reason"]


def test_no_capture_size_advice_while_cuda_graphs_are_off():
    decodes = [GRAPH.format(s=s, u=0.95, g="False") for s in range(10, 50, 10)]
    changes, _ = advise(args(cuda_graph_max_bs=24), CONFIG.format(chunk=4096, free=6.0), *decodes)
    assert changes["--cuda-graph-max-bs"]["suggested"] == 64  # graphs on, batches of 40 above 24
    for off in (args(cuda_graph_max_bs=24, disable_cuda_graph=True),):
        changes, _ = advise(off, CONFIG.format(chunk=4096, free=6.0), *decodes)
        assert "--cuda-graph-max-bs" not in changes
    warning = (
        "[2025-11-11 13:01:00] WARNING server_args.py:925: Cuda graph is disabled because KT LoRA uses "
        "KT SFT CPU expert forward with host-side input copies."
    )
    changes, _ = advise(warning, args(cuda_graph_max_bs=24), CONFIG.format(chunk=4096, free=6.0), *decodes)
    assert "--cuda-graph-max-bs" not in changes


def test_request_slots_running_out_halves_the_running_cap():
    """mem_cache/common.py alloc_req_slots: the request pool, not the KV cache, ran out."""
    slot_error = (
        "[2025-11-11 13:03:00 TP0] RuntimeError: alloc_req_slots runs out of memory. Please set a smaller "
        "number for `--max-running-requests`. req_to_token_pool.available_size()=0, num_reqs=4, "
    )
    result = tune.advise(
        tune.parse_text(
            "\n".join([args(max_running_requests=48), CONFIG.format(chunk=4096, free=6.0), slot_error])
        )
    )
    assert result["summary"]["oom_errors"]["req_slots"] == 1
    running = {r["parameter"]: r for r in result["recommendations"]}["--max-running-requests"]
    assert (running["current"], running["suggested"]) == (4096, 2048)  # the scheduler's line wins
    assert "request slots ran out" in running["reason"]
