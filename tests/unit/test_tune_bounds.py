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
    line = ARGS
    for key, value in values.items():
        line, count = re.subn(rf"\b{key}=[^,)]*", f"{key}={value}", line)
        assert count == 1, key
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
