"""Adapters on a serve plan (`ktinfra lora plan`, `lora serve`, `plan --lora`): what sglang-kt 0.7.2 needs
for KT LoRA: every expert on the CPU (deferred as the planner defers them), no GPU prefill threshold
(kt_ep_wrapper.py), at least 2 running requests (server_args.py)."""

from __future__ import annotations

import json

from test_lora import H100, merged_kt_dir, peft_dir, serve_args
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.render import render_serve

KT_KEYS = ("kt_num_gpu_experts", "kt_max_deferred_experts_per_token", "kt_gpu_prefill_token_threshold")


def _h100_plan(tmp_path, **serve) -> str:
    """Qwen3-30B-A3B on the H100 capture: BF16 with all 128 experts on the GPU, so nothing deferred."""
    res = CliRunner().invoke(app, ["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert [plan["serve"][k] for k in KT_KEYS] == [128, 0, None]
    plan["serve"].update(serve)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return str(path)


def test_lora_serve_defers_the_experts_it_moves_to_the_cpu(tmp_path):
    res = CliRunner().invoke(app, serve_args(peft_dir(tmp_path / "out"), "--dry-run", "--json"))
    assert res.exit_code == 0, res.output
    serve = json.loads(res.stdout)["serve"]
    # the planner's choice for 0 GPU experts (`plan --lora` gives the same), not the 0 planned for 128
    assert [serve[k] for k in KT_KEYS] == [0, 2, None]


def test_lora_plan_makes_a_plan_sglang_kt_starts(tmp_path):
    plan = _h100_plan(tmp_path, kt_gpu_prefill_token_threshold=2048, max_running_requests=1)
    adapter = merged_kt_dir(tmp_path / "kt")  # converted: a training output is refused
    res = CliRunner().invoke(app, ["lora", "plan", "--plan", plan, "--adapter", f"kt={adapter}", "--json"])
    assert res.exit_code == 0, res.output
    planned = json.loads(res.stdout)
    serve = planned["serve"]
    assert [serve[k] for k in KT_KEYS] == [0, 2, None] and serve["max_running_requests"] == 2
    assert serve["lora"] == {"paths": {"kt": str(adapter)}, "max_loras_per_batch": 1, "backend": "triton"}
    assert "raised from 1" in planned["reasons"]["max_running_requests"]
    argv = render_serve(planned, name="q", model_path="/m").info["argv"]
    assert "--kt-gpu-prefill-token-threshold" not in argv
    assert argv[argv.index("--max-running-requests") + 1] == "2"


def test_lora_plan_refuses_a_kt_adapter_beside_another(tmp_path):
    plan = _h100_plan(tmp_path)
    specs = [f"kt={merged_kt_dir(tmp_path / 'kt')}", f"peft={peft_dir(tmp_path / 'peft')}"]
    args = ["lora", "plan", "--plan", plan, "--json"] + [f"--adapter={spec}" for spec in specs]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1 and res.stdout == ""
    assert "adapter kt carries LoRA on the routed experts, which sglang-kt serves only alone" in res.stderr


def test_plan_refuses_one_running_request_with_adapters(tmp_path):
    args = ["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--json", "--max-running-requests", "1"]
    res = CliRunner().invoke(app, [*args, "--lora", f"kt={merged_kt_dir(tmp_path / 'kt')}"])
    assert res.exit_code == 2, res.output
    assert any("sglang-kt serves LoRA with at least 2" in p for p in json.loads(res.stdout)["problems"])
    assert CliRunner().invoke(app, args).exit_code == 0  # without adapters one request is a choice
