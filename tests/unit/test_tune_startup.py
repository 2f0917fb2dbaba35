"""A server that never started: `ktinfra tune` on the log of a crash-looping unit. Formats from
kvcache-ai/sglang model_runner.py (`Load weight begin. avail mem=… GB` / `Load weight end. …`) and
model_runner_kv_cache_mixin.py
(`Not enough memory. Please try to increase --mem-fraction-static. Current value: …`).

Before: a CUDA OOM while the weights loaded was an "unknown" OOM, so tune lowered --mem-fraction-static, which
SGLang applies only once the weights are in (the KV pool is sized after them): the next start OOMed the same.
"Not enough memory" (no room left for any KV pool) was no event at all: "no SGLang scheduler lines found"."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from ktinfra import tune
from ktinfra.cli import app


def args(fraction: float = 0.92, experts: int = 32, seed: int = 1) -> str:
    return (
        "[2025-11-11 13:00:40] server_args=ServerArgs(model_path='/data/models/Qwen3-30B-A3B', "
        f"mem_fraction_static={fraction}, chunked_prefill_size=4096, max_running_requests=None, "
        f"kt_num_gpu_experts={experts}, random_seed={seed})"
    )


BEGIN = "[2025-11-11 13:00:50 {rank}] Load weight begin. avail mem=23.20 GB"
END = (
    "[2025-11-11 13:01:20 {rank}] Load weight end. elapsed=30.02 s, type=Qwen3MoeForCausalLM, "
    "dtype=torch.bfloat16, avail mem=9.10 GB, mem usage=14.10 GB."
)
LOAD_TRACEBACK = [
    "[2025-11-11 13:01:30 {rank}] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2950, in run_scheduler_process',
    "    scheduler = Scheduler(",
    '  File "/opt/sglang/python/sglang/srt/model_executor/model_runner.py", line 501, in initialize',
    "    self.load_model()",
    '  File "/opt/sglang/python/sglang/srt/model_loader/loader.py", line 600, in load_model',
    "    model = _initialize_model(",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 768.00 MiB. GPU 0 has a total capacity "
    "of 23.55 GiB of which 301.06 MiB is free.",
]
NO_POOL = [
    "[2025-11-11 13:01:31 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/opt/sglang/python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py", line 552, '
    "in init_memory_pool",
    "    raise RuntimeError(",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
    "self.server_args.mem_fraction_static=0.6",
]


def run(*lines: str) -> dict:
    return tune.advise(tune.parse_text("\n".join(lines) + "\n"))


def changes(result: dict) -> dict:
    return {r["parameter"]: (r["current"], r["suggested"]) for r in result["recommendations"]}


def test_an_oom_while_the_weights_load_moves_gpu_experts_not_the_static_pool():
    result = run(args(), BEGIN.format(rank="TP0"), *(line.format(rank="TP0") for line in LOAD_TRACEBACK))
    assert result["summary"]["oom_errors"]["load"] == 1
    assert changes(result) == {"--kt-num-gpu-experts": (32, 16)}  # before: --mem-fraction-static 0.92 -> 0.87
    assert "while loading the weights" in result["recommendations"][0]["reason"]
    assert result["recommendations"][0]["evidence"][0].startswith("torch.OutOfMemoryError")


def test_the_load_phase_is_per_rank_and_read_from_the_traceback_too():
    # TP 2: rank 0 finished loading, rank 1 ran out of memory still loading
    two = run(
        args(),
        BEGIN.format(rank="TP0"),
        BEGIN.format(rank="TP1"),
        END.format(rank="TP0"),
        *(line.format(rank="TP1") for line in LOAD_TRACEBACK),
    )
    assert two["summary"]["oom_errors"]["load"] == 1
    # a log without the "Load weight begin" line (cut): the traceback's load_model frame says it
    cut = run(args(), *(line.format(rank="TP0") for line in LOAD_TRACEBACK))
    assert changes(cut) == {"--kt-num-gpu-experts": (32, 16)}


def test_a_load_oom_without_gpu_experts_names_no_value_and_no_pool_change():
    result = run(args(experts=0), BEGIN.format(rank="TP0"), *(x.format(rank="TP0") for x in LOAD_TRACEBACK))
    assert result["recommendations"] == []
    (advice,) = result["advice"]
    assert advice["parameter"] == "--kt-num-gpu-experts" and advice["suggested"] is None
    assert "smaller weight format or more GPUs" in advice["reason"]


def test_an_oom_after_loading_is_still_placed_by_its_traceback():
    result = run(
        args(),
        BEGIN.format(rank="TP0"),
        END.format(rank="TP0"),
        "[2025-11-11 13:05:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/opt/sglang/python/sglang/srt/model_executor/model_runner.py", line 2100, in forward_decode',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.",
    )
    assert result["summary"]["oom_errors"]["decode"] == 1 and result["summary"]["oom_errors"]["load"] == 0


def test_no_memory_left_for_the_kv_pool_raises_the_static_fraction():
    result = run(args(fraction=0.6), BEGIN.format(rank="TP0"), END.format(rank="TP0"), *NO_POOL)
    assert changes(result) == {"--mem-fraction-static": (0.6, 0.65)}
    assert result["summary"]["no_kv_pool"] == 1
    assert result["summary"]["message"] == "1 change(s) recommended"  # before: no scheduler lines found


def test_no_kv_pool_with_a_high_fraction_moves_gpu_experts():
    result = run(args(fraction=0.88, experts=64), *NO_POOL)
    assert changes(result) == {"--kt-num-gpu-experts": (64, 32)}


def test_no_kv_pool_without_server_args_is_advice():
    result = run(*NO_POOL)
    assert result["recommendations"] == []
    assert result["advice"][0]["parameter"] == "--mem-fraction-static"
    assert result["advice"][0]["suggested"] is None


def test_a_crash_loop_of_the_same_flags_counts_every_start(tmp_path: Path):
    # Restart=on-failure: three starts with the same flags (random_seed drawn anew), each stopped the same way
    lines = [line for seed in (1, 2, 3) for line in (args(fraction=0.6, seed=seed), *NO_POOL)]
    log = tmp_path / "sglang.log"
    log.write_text("\n".join(lines) + "\n")
    result = run(*lines)
    assert result["summary"]["no_kv_pool"] == 3 and result["summary"]["earlier_runs_carried"] == 2
    assert changes(result) == {"--mem-fraction-static": (0.6, 0.65)}
    res = CliRunner().invoke(app, ["tune", "--log", str(log)])
    assert res.exit_code == 0, res.output
    assert "no memory left for the KV pool at start 3" in " ".join(res.output.split())
    vars_file = tmp_path / "tune.yml"
    res = CliRunner().invoke(app, ["tune", "--log", str(log), "--ansible-vars", str(vars_file), "--json"])
    assert res.exit_code == 0, res.output
    assert "mem_fraction_static: 0.65" in vars_file.read_text()


def test_no_kv_pool_with_a_high_fraction_and_an_experts_ratio_halves_the_ratio():
    """sglang-kt ignores --kt-num-gpu-experts while --kt-gpu-experts-ratio is set: before, the only advice
    was --mem-fraction-static 0.88 -> 0.91, which leaves activations 3 % less and frees no expert."""
    line = args(fraction=0.88, experts=64).replace("random_seed", "kt_gpu_experts_ratio=0.5, random_seed")
    result = run(line, *NO_POOL)
    assert changes(result) == {"--kt-gpu-experts-ratio": (0.5, 0.25)}
    reason = result["recommendations"][0]["reason"]
    assert "--mem-fraction-static 0.88 leaves little for activations already" in reason
    assert "--ansible-vars does not write it" in reason
    assert result["recommendations"][0]["evidence"] == [NO_POOL[-1]]


def test_no_kv_pool_with_a_ratio_of_zero_still_raises_the_fraction():
    line = args(fraction=0.88, experts=64).replace("random_seed", "kt_gpu_experts_ratio=0.0, random_seed")
    assert changes(run(line, *NO_POOL)) == {"--mem-fraction-static": (0.88, 0.91)}
