"""--kt-gpu-experts-ratio 0 (every expert on the CPU) makes sglang-kt ignore --kt-num-gpu-experts as any
ratio does (kt_ep_wrapper.py: the ratio wins whenever it is set). The OOM rule read the ratio by its truth,
so with 0.0 it still told a capped-pool server to halve --kt-num-gpu-experts (32 -> 16), a change that moves
no expert, and --ansible-vars wrote it."""

from __future__ import annotations

import pytest
from test_tune_bounds import CAPPED, advise, args

DECODE_OOM = "[2025-11-11 13:02:00 TP0] Decode out of memory. Try to lower your batch size."


@pytest.mark.parametrize("ratio", ["0.0", "0.25"])
def test_an_oom_with_any_experts_ratio_does_not_halve_the_ignored_count(ratio):
    line = args(max_total_tokens=60000, kt_num_gpu_experts=32, kt_gpu_experts_ratio=ratio)
    changes, _ = advise(line, CAPPED.format(free=6.0), DECODE_OOM)
    assert "--kt-num-gpu-experts" not in changes
    assert (changes["--max-running-requests"]["current"], changes["--max-running-requests"]["suggested"]) == (
        32,
        16,
    )


def test_without_a_ratio_the_oom_still_halves_the_count():
    line = args(max_total_tokens=60000, kt_num_gpu_experts=32, kt_gpu_experts_ratio="None")
    changes, _ = advise(line, CAPPED.format(free=6.0), DECODE_OOM)
    assert (changes["--kt-num-gpu-experts"]["current"], changes["--kt-num-gpu-experts"]["suggested"]) == (
        32,
        16,
    )
