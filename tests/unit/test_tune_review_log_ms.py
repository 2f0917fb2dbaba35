"""`ktinfra tune` on a log whose stamps carry milliseconds. SGLang's configure_logger (utils/common.py) writes
`[%(asctime)s.%(msecs)03d TP0]` when SGLANG_LOG_MS=1, so two lines of one rank differ in their bracket.

Before: the rank of `Load weight begin` (".200 TP0") never matched the one of `Load weight end` (".731 TP0"),
the weights counted as loading for the rest of the log, and a decode OOM an hour later was read as the
weights not fitting: --kt-num-gpu-experts halved instead of --max-running-requests."""

from __future__ import annotations

import pytest

from ktinfra import tune

ARGS = (
    "[2025-11-11 13:00:40{ms}] server_args=ServerArgs(model_path='/m', mem_fraction_static=0.9, "
    "max_running_requests=32, kt_num_gpu_experts=8, chunked_prefill_size=4096)"
)
LOG = [
    ARGS,
    "[2025-11-11 13:00:50{ms} TP0] Load weight begin. avail mem=78.00 GB",
    "[2025-11-11 13:01:05{ms2} TP0] Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, "
    "avail mem=40.00 GB, mem usage=38.00 GB.",
    "[2025-11-11 13:01:09{ms} TP0] max_total_num_tokens=100000, chunked_prefill_size=4096, "
    "max_prefill_tokens=16384, max_running_requests=32, context_len=32768, available_gpu_mem=6.20 GB",
    "[2025-11-11 13:01:40{ms2} TP0] Decode batch, #running-req: 32, #token: 90000, token usage: 0.90, "
    "cuda graph: True, gen throughput (token/s): 400.00, #queue-req: 3, ",
    "[2025-11-11 13:01:41{ms} TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 100, in run_batch',
    "    logits_output = self.model_runner.forward_decode(batch)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
]


@pytest.mark.parametrize(("ms", "ms2"), [("", ""), (".200", ".731"), (",200", ",731")])
def test_a_decode_oom_after_loading_is_a_decode_oom_whatever_the_stamp(ms, ms2):
    log = tune.parse_text("\n".join(LOG).format(ms=ms, ms2=ms2) + "\n")
    assert [o.phase for o in log.ooms] == ["decode"]
    result = tune.advise(log)
    changes = {r["parameter"]: (r["current"], r["suggested"]) for r in result["recommendations"]}
    assert changes == {"--max-running-requests": (32, 16)}


def test_an_oom_while_loading_is_still_a_load_oom_with_milliseconds():
    lines = [line.format(ms=".200", ms2=".731") for line in LOG[:2]] + LOG[-4:]
    log = tune.parse_text("\n".join(lines).format(ms=".900") + "\n")
    assert [o.phase for o in log.ooms] == ["load"]
