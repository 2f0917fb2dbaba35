"""`ktinfra tune` on a LoRA server keeps to the bounds `ktinfra plan` and render hold a LoRA plan to
(sglang-kt 0.7.2: server_args.py refuses --max-running-requests below 2 beside KT LoRA; kt_ep_wrapper.py
refuses GPU experts beside expert LoRA; render refuses serve.lora with either). The server_args dump says LoRA
is on: enable_lora=True (set from --lora-paths) or kt_lora_path / kt_expert_lora_path.

Before: a decode OOM at 2 or 3 running requests suggested --max-running-requests 1, and a pool that never
filled at the cap suggested --kt-num-gpu-experts 1 (0 * 2, floored at 1): both written to --ansible-vars as
kt_serve_overrides, which the next render (or the server) refuses."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from ktinfra import tune
from ktinfra.cli import app

LORA_ARGS = {
    "enable_lora": "enable_lora=True, lora_paths=[LoRARef(lora_id='1', lora_name='mine', lora_path='/a')]",
    "kt_lora_path": "enable_lora=None, kt_lora_path='/srv/adapters/mine_sglang'",
    "kt_expert_lora_path": "enable_lora=None, kt_expert_lora_path='/srv/adapters/mine_sglang'",
}
PLAIN = "enable_lora=None, lora_paths=None, kt_lora_path=None"


def _log(lora: str, running: int, usage: float = 0.92, oom: bool = True) -> str:
    lines = [
        "[2025-11-11 13:00:40] server_args=ServerArgs(model_path='/m', mem_fraction_static=0.9, "
        f"max_running_requests={running}, kt_num_gpu_experts=0, chunked_prefill_size=4096, "
        f"disable_cuda_graph=True, {lora}, random_seed=1)",
        f"[2025-11-11 13:01:09 TP0] max_total_num_tokens=400000, chunked_prefill_size=4096, "
        f"max_prefill_tokens=16384, max_running_requests={running}, context_len=32768, "
        "available_gpu_mem=6.20 GB",
    ]
    lines += [
        f"[2025-11-11 13:01:{10 + i} TP0] Decode batch, #running-req: {running}, #token: 1000, token usage: "
        f"{usage:.2f}, cuda graph: False, gen throughput (token/s): 20.00, #queue-req: 0, "
        for i in range(4)
    ]
    if oom:
        lines += [
            "[2025-11-11 13:02:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 100, in run_batch',
            "    logits_output = self.model_runner.forward_decode(batch)",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        ]
    return "\n".join(lines) + "\n"


def _by_param(result: dict) -> dict:
    return {r["parameter"]: r for r in result["recommendations"] + result["advice"]}


@pytest.mark.parametrize("lora", LORA_ARGS)
@pytest.mark.parametrize(("running", "suggested"), [(2, None), (3, 2), (8, 4)])
def test_a_decode_oom_on_a_lora_server_never_goes_below_two_running_requests(lora, running, suggested):
    result = tune.advise(tune.parse_text(_log(LORA_ARGS[lora], running)))
    rec = _by_param(result)["--max-running-requests"]
    assert (rec["current"], rec["suggested"]) == (running, suggested)
    if suggested is None:
        assert "runs LoRA, which sglang-kt serves with at least 2 running requests" in rec["reason"]
        assert rec in result["advice"]


@pytest.mark.parametrize(("running", "suggested"), [(2, 1), (3, 1), (8, 4)])
def test_without_lora_the_halving_is_as_before(running, suggested):
    rec = _by_param(tune.advise(tune.parse_text(_log(PLAIN, running))))["--max-running-requests"]
    assert (rec["current"], rec["suggested"]) == (running, suggested)


def test_an_unfilled_pool_on_a_lora_server_asks_for_no_gpu_experts(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_text(_log(LORA_ARGS["enable_lora"], 4, usage=0.2, oom=False))
    out = tmp_path / "tune.yml"
    res = CliRunner().invoke(app, ["tune", "--log", str(log), "--ansible-vars", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert "kt_num_gpu_experts" not in yaml.safe_load(out.read_text())["kt_serve_overrides"]
    # the same log without LoRA still gets the GPU experts the unused pool could hold
    plain = tune.advise(tune.parse_text(_log(PLAIN, 4, usage=0.2, oom=False)))
    assert _by_param(plain)["--kt-num-gpu-experts"]["suggested"] == 1
