"""lm_head LoRA on the csgmv backend, and `plan --lora` asking the backend / tensor-parallel check.

Upstream's server_args.py (sglang-kt 0.7.2 and the legacy fork eaf832e alike): "LoRA backend 'csgmv' does
not yet support embedding or lm_head layers", and it drops both from --lora-target-modules all; an
adapter's own lm_head LoRA was passed by ktinfra on csgmv. `plan --lora` checked the adapter's config but not
what its backend and tensor parallel run, so a 2-GPU plan with an lm_head adapter printed with exit 0 and
only `render serve` refused it."""

from __future__ import annotations

import json

import pytest
from test_lora import H100
from test_lora_cli_errors import assert_clean_error, invoke
from test_lora_review2_render_backend import _adapter, lora_plan

from ktinfra.render import RenderError, render_serve

TWO_GPUS = "tests/fixtures/hosts/2xh200-xeon-amx-32c"


def _plan_file(tmp_path) -> str:
    result = invoke(["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--json"])
    path = tmp_path / "plan.json"
    path.write_text(result.stdout)
    return str(path)


@pytest.mark.parametrize("head", ["lm_head", "base_model.model.lm_head", "unembed_tokens"])
def test_lora_plan_refuses_lm_head_lora_on_csgmv(tmp_path, head):
    adapter = _adapter(tmp_path, "q_proj", head)
    args = ["lora", "plan", "--plan", _plan_file(tmp_path), "--adapter", f"e={adapter}"]
    result = invoke([*args, "--lora-backend", "csgmv"])
    assert_clean_error(result, f"adapter e has LoRA on the output head ({head!r} in target_modules)")
    assert "pass --lora-backend triton" in result.output


@pytest.mark.parametrize("backend", ["triton", "torch_native"])
def test_lm_head_lora_is_planned_on_the_other_backends(tmp_path, backend):
    adapter = _adapter(tmp_path, "q_proj", "lm_head")
    args = ["lora", "plan", "--plan", _plan_file(tmp_path), "--adapter", f"e={adapter}"]
    result = invoke([*args, "--lora-backend", backend, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["serve"]["lora"]["backend"] == backend


def test_render_serve_refuses_lm_head_lora_on_csgmv(tmp_path):
    plan = lora_plan({"e": _adapter(tmp_path, "lm_head")}, "csgmv")
    with pytest.raises(RenderError, match=r"tensor_parallel_size 1\): adapter e has LoRA on the output head"):
        render_serve(plan, name="q", model_path="/m", weight_path="/w")


@pytest.mark.parametrize("target", ["lm_head", "model.embed_tokens"])
def test_plan_lora_refuses_vocab_lora_on_two_gpus(tmp_path, target):
    adapter = _adapter(tmp_path, "q_proj", target)
    args = ["plan", "--model", "Qwen3-30B-A3B", "--from", TWO_GPUS, "--lora", f"e={adapter}", "--json"]
    result = invoke(args)
    where = "--lora (backend triton, tensor_parallel_size 2)"
    assert_clean_error(result, f"{where}: adapter e has LoRA on {target!r} (target_modules)")
    assert "the plan serves with tensor_parallel_size 2" in result.output


def test_plan_lora_keeps_vocab_lora_on_one_gpu(tmp_path):
    adapter = _adapter(tmp_path, "q_proj", "model.embed_tokens", "lm_head")
    args = ["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--lora", f"e={adapter}", "--json"]
    result = invoke(args)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["serve"]["tensor_parallel_size"] == 1
    assert plan["serve"]["lora"]["paths"] == {"e": str(adapter)}
