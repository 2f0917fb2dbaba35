"""`ktinfra tune` on a server that ran out of GPU memory capturing its CUDA graphs at start. Frames and
messages from sglang-kt 0.7.2: model_runner.py `initialize` sizes the KV pool (init_memory_pool, line 610)
before `init_device_graphs` (line 660); cuda_graph_runner.py `__init__` re-raises the capture's error as
`Exception: Capture cuda graph failed: {e}` with SGLang's "Possible solutions" (lower --mem-fraction-static,
lower --cuda-graph-max-bs); the capture runs the model, whose attention calls the backend's forward_decode.

Before: that forward_decode frame made the OOM a decode OOM, so tune halved --max-running-requests, which does
not change the graphs SGLang captures (their batch sizes are set by --cuda-graph-max-bs)."""

from __future__ import annotations

from ktinfra import tune

ARGS = (
    "[2025-11-11 13:00:40] server_args=ServerArgs(model_path='/data/models/Qwen3-30B-A3B', "
    "mem_fraction_static={fraction}, chunked_prefill_size=4096, max_running_requests=32, "
    "cuda_graph_max_bs={bs}, kt_num_gpu_experts=0, random_seed=7)"
)
START = [
    "[2025-11-11 13:01:20 TP0] Load weight end. elapsed=30.02 s, type=Qwen3MoeForCausalLM, "
    "dtype=torch.bfloat16, avail mem=61.10 GB, mem usage=14.10 GB.",
    "[2025-11-11 13:01:21 TP0] KV Cache is allocated. #tokens: 480000, K size: 22.00 GB, V size: 22.00 GB",
    "[2025-11-11 13:01:22 TP0] Capture cuda graph bs [1, 2, 4, 8, 12, 16, 24, 32]",
]
SGLANG = "/opt/venv/lib/python3.12/site-packages/sglang/srt"
OOM = (
    "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which "
    "412.06 MiB is free."
)
CAPTURE_TRACEBACK = [
    "[2025-11-11 13:01:25 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    f'  File "{SGLANG}/model_executor/cuda_graph_runner.py", line 571, in __init__',
    "    self.capture()",
    f'  File "{SGLANG}/model_executor/cuda_graph_runner.py", line 731, in _capture_one_stream',
    "    ) = self.capture_one_batch_size(bs, forward, stream_idx)",
    f'  File "{SGLANG}/model_executor/cuda_graph_runner.py", line 954, in capture_one_batch_size',
    "    run_once()",
    f'  File "{SGLANG}/model_executor/cuda_graph_runner.py", line 941, in run_once',
    "    logits_output_or_pp_proxy_tensors = forward(",
    f'  File "{SGLANG}/models/qwen3_moe.py", line 928, in forward',
    "    hidden_states = self.model(",
    f'  File "{SGLANG}/layers/radix_attention.py", line 127, in forward',
    "    return forward_batch.attn_backend.forward(",
    f'  File "{SGLANG}/layers/attention/base_attn_backend.py", line 96, in forward',
    "    return self.forward_decode(",
    f'  File "{SGLANG}/layers/attention/flashinfer_backend.py", line 862, in forward_decode',
    "    o = decode_wrapper.forward(",
    f"torch.OutOfMemoryError: {OOM}",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
    "Traceback (most recent call last):",
    f'  File "{SGLANG}/managers/scheduler.py", line 3211, in run_scheduler_process',
    "    scheduler = Scheduler(",
    f'  File "{SGLANG}/model_executor/model_runner.py", line 660, in initialize',
    "    self.init_device_graphs()",
    f'  File "{SGLANG}/model_executor/model_runner.py", line 2252, in init_device_graphs',
    "    self.graph_runner = graph_runners[self.device](self)",
    f'  File "{SGLANG}/model_executor/cuda_graph_runner.py", line 573, in __init__',
    "    raise Exception(",
    f"Exception: Capture cuda graph failed: {OOM}",
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
]
# a decode OOM while serving: the captured graph replays (replay frames), no capture
REPLAY_TRACEBACK = [
    "[2025-11-11 13:09:25 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    f'  File "{SGLANG}/model_executor/model_runner.py", line 2500, in _forward_raw',
    "    ret = self.graph_runner.replay(",
    f'  File "{SGLANG}/model_executor/cuda_graph_runner.py", line 1100, in replay',
    "    self.replay_prepare(forward_batch, pp_proxy_tensors)",
    f'  File "{SGLANG}/layers/attention/flashinfer_backend.py", line 862, in forward_decode',
    "    o = decode_wrapper.forward(",
    f"torch.OutOfMemoryError: {OOM}",
]


def run(lines: list[str], fraction: float | str = 0.92, bs: int = 32) -> dict:
    return tune.advise(tune.parse_text("\n".join([ARGS.format(fraction=fraction, bs=bs), *lines]) + "\n"))


def changes(result: dict) -> dict:
    return {r["parameter"]: (r["current"], r["suggested"]) for r in result["recommendations"]}


def test_a_graph_capture_oom_lowers_the_static_pool_not_the_running_requests():
    result = run(START + CAPTURE_TRACEBACK)
    ooms = result["summary"]["oom_errors"]
    # one event: the torch error and the runner's re-raise 14 lines below it are the same OOM
    assert ooms["cuda_graph"] == 1
    assert ooms["decode"] == 0 and ooms["unknown"] == 0
    # before: --max-running-requests 32 -> 16
    assert changes(result) == {"--mem-fraction-static": (0.92, 0.87)}
    reason = result["recommendations"][0]["reason"]
    assert "capturing CUDA graphs" in reason and "--cuda-graph-max-bs 16" in reason
    assert result["recommendations"][0]["evidence"] == [f"torch.OutOfMemoryError: {OOM}"]


def test_the_re_raise_alone_is_a_graph_capture_oom():
    # a log cut above the chained traceback keeps only the runner's frame and its message
    result = run(START + CAPTURE_TRACEBACK[-8:])
    assert result["summary"]["oom_errors"]["cuda_graph"] == 1
    assert changes(result)["--mem-fraction-static"] == (0.92, 0.87)


def test_the_static_pool_floor_and_an_unknown_fraction_give_advice():
    floor = run(START + CAPTURE_TRACEBACK, fraction=0.5)
    assert changes(floor) == {}
    assert [a["parameter"] for a in floor["advice"]] == ["--mem-fraction-static"]
    assert "--cuda-graph-max-bs 16" in floor["advice"][0]["reason"]
    unknown = run(START + CAPTURE_TRACEBACK, fraction="'x'")
    assert "lower it by about 0.05" in unknown["advice"][0]["reason"]


def test_the_captured_sizes_stand_in_for_an_unset_cuda_graph_max_bs():
    result = run(START + CAPTURE_TRACEBACK, bs="None")
    assert "--cuda-graph-max-bs 16" in result["recommendations"][0]["reason"]  # max of the captured sizes, 32


def test_a_decode_oom_replaying_a_graph_stays_a_decode_oom():
    result = run(START + REPLAY_TRACEBACK)
    assert result["summary"]["oom_errors"]["decode"] == 1
    assert result["summary"]["oom_errors"]["cuda_graph"] == 0
    assert changes(result) == {"--max-running-requests": (32, 16)}
