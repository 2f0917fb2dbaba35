"""`--max-running-requests`: the concurrency a user fixes (an SLO the planner cannot know: how fast each
request must decode depends on the host's memory bandwidth) with the KV budget and the GPU experts planned
around it, instead of an `overrides:` value set after the plan."""

import json
import subprocess
import sys

import pytest
from model_configs import QWEN3_NEXT_80B_A3B
from test_plan import FACTS, SEED002, facts

from ktinfra import sizing
from ktinfra.planner import PlanInputError, plan
from ktinfra.render import sglang_argv

L40S = "dual-spr-2xnuma-4xl40s"


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_fewer_requests_give_their_kv_to_gpu_experts():
    default = plan(facts(SEED002), "Qwen3-30B-A3B", "serve")
    four = plan(facts(SEED002), "Qwen3-30B-A3B", "serve", max_running_requests=4)
    assert default["serve"]["max_running_requests"] == 16 and default["serve"]["kt_num_gpu_experts"] == 31
    serve = four["serve"]
    assert four["feasible"] and serve["max_running_requests"] == serve["cuda_graph_max_bs"] == 4
    assert serve["kt_num_gpu_experts"] == 41  # 12 x 4096 tokens of KV (4.8 GB) hold 10 more experts
    reason = four["reasons"]["max_running_requests"]
    assert reason.startswith("4: --max-running-requests") and "would give 16 on 8 cores" in reason
    argv = sglang_argv(four, model_path="/m", weight_path="/w")
    assert _flag(argv, "--max-running-requests") == "4" and _flag(argv, "--kt-num-gpu-experts") == "41"


def test_the_default_reason_names_the_trade_off():
    reason = plan(facts(SEED002), "Qwen3-30B-A3B", "serve")["reasons"]["max_running_requests"]
    assert "about 2 requests per core" in reason and "--max-running-requests trades" in reason


def test_requests_that_cannot_fit_are_a_problem_with_numbers_not_halved():
    result = plan(facts(SEED002), "Qwen3-30B-A3B", "serve", max_running_requests=64)
    assert not result["feasible"] and result["serve"]["max_running_requests"] == 64
    assert result["serve"]["kt_num_gpu_experts"] == 0
    assert any(
        p.startswith("--max-running-requests 64 needs 25.8 GB of KV") and "holds at most 51 requests" in p
        for p in result["problems"]
    ), result["problems"]


def test_the_largest_count_the_problem_names_fits():
    result = plan(facts(SEED002), "Qwen3-30B-A3B", "serve", max_running_requests=51)
    assert result["feasible"], result["problems"]
    assert plan(facts(SEED002), "Qwen3-30B-A3B", "serve", max_running_requests=52)["feasible"] is False


def test_fixed_requests_give_up_the_layerwise_prefill_layer_before_they_are_cut():
    """Kimi-K2-Thinking on 4 x L40S: the default halves 128 to 64 to keep the 9.5 GB prefill layer; asked
    for 128, the plan keeps 128 and gives the layer (and the GPU experts) up."""
    result = plan(facts(L40S), "Kimi-K2-Thinking", "serve", max_running_requests=128)
    serve = result["serve"]
    assert result["feasible"] and serve["max_running_requests"] == 128
    assert serve["kt_gpu_prefill_token_threshold"] is None and serve["kt_num_gpu_experts"] == 0
    assert "halved" not in result["reasons"]["max_running_requests"]
    assert serve["max_total_tokens"] >= 128 * 4096


def test_a_hybrid_model_gets_three_state_slots_per_fixed_request(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_NEXT_80B_A3B))
    result = plan(facts("h100-amx"), str(tmp_path), "serve", max_running_requests=8)
    assert result["serve"]["max_mamba_cache_size"] == 8 * sizing.STATE_SLOTS_PER_REQUEST == 24


@pytest.mark.parametrize("value", [0, -4, True, 2.5, "8"])
def test_a_bad_count_is_refused(value):
    with pytest.raises(PlanInputError, match="--max-running-requests must be a positive integer"):
        plan(facts(SEED002), "Qwen3-30B-A3B", "serve", max_running_requests=value)


def test_sft_has_no_running_requests():
    with pytest.raises(PlanInputError, match="--max-running-requests applies to serve"):
        plan(facts(SEED002), "Qwen3-30B-A3B", "sft", max_running_requests=4)


@pytest.mark.parametrize(
    "extra, rc, message",
    [
        (["--max-running-requests", "4"], 0, None),
        (["--max-running-requests", "64"], 2, "holds at most 51 requests"),
        (["--max-running-requests", "0"], 1, None),
        (["--max-running-requests", "4", "--mode", "sft"], 1, "applies to --mode serve"),
    ],
)
def test_the_command_line(extra, rc, message):
    args = ["plan", "--model", "Qwen3-30B-A3B", "--facts", str(FACTS / f"{SEED002}.json"), "--json", *extra]
    proc = subprocess.run([sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True)
    assert proc.returncode == rc, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    if rc == 0:
        assert json.loads(proc.stdout)["serve"]["max_running_requests"] == 4
    if message:
        assert message in proc.stdout + proc.stderr
