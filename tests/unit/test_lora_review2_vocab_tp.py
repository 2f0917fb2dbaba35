"""embed_tokens / lm_head LoRA with tensor parallel > 1 is refused by `lora plan`, `lora serve` and
`render serve`, before anything is written.

sglang-kt 0.7.2 (its wheel, and the legacy fork alike) writes both LoRA layers for one GPU:
srt/lora/layers.py VocabParallelEmbeddingWithLoRA (:56) and ParallelLMHeadWithLoRA (:214) are "simplified
for TP=1" and their slice_lora_*_weights raise "does not support tensor parallelism > 1" (:196, :287);
mem_pool.py keeps their buffers whole ("Have not imp self.tp_size > 1 yet", :240, :281; "[to-do] support
TP", :578, :609). Nothing refuses it at start: lm_head's LoRA B spans the whole vocabulary
(triton_ops/sgemm_lora_b.py:136, N = weights.shape[-2]; output_offset [0, org_vocab_size], layers.py:228)
and is added into each rank's vocab/tp-wide logits shard (layers.py:271). Before, all three exited 0."""

from __future__ import annotations

import json

import pytest
from test_lora import H100, serve_args
from test_lora_cli_errors import assert_clean_error, invoke
from test_lora_review2_render_backend import _adapter, lora_plan

from ktinfra.render import RenderError, render_serve

REFUSED = "and the plan serves with tensor_parallel_size 2: SGLang's embed_tokens and lm_head LoRA layers"


def _plan_file(tmp_path, tp_size: int) -> str:
    result = invoke(["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--json"])
    plan = json.loads(result.stdout)
    plan["serve"].update(tensor_parallel_size=tp_size, gpu_indices=None)
    path = tmp_path / f"plan-tp{tp_size}.json"
    path.write_text(json.dumps(plan))
    return str(path)


@pytest.mark.parametrize("targets", [["q_proj", "lm_head"], ["q_proj", "embed_tokens", "lm_head"]])
def test_lora_plan_refuses_vocab_lora_on_two_gpus(tmp_path, targets):
    adapter = _adapter(tmp_path, *targets)
    result = invoke(["lora", "plan", "--plan", _plan_file(tmp_path, 2), "--adapter", f"e={adapter}"])
    vocab = ", ".join(repr(t) for t in targets[1:])
    assert_clean_error(result, f"adapter e has LoRA on {vocab} (target_modules), {REFUSED}")
    assert "serve it with tensor_parallel_size 1" in result.output


def test_lora_serve_refuses_it_before_writing(tmp_path):
    adapter = _adapter(tmp_path, "q_proj", "lm_head")
    out = tmp_path / "bundle"
    args = ["lora", "serve", "--base", "/models/Qwen3-30B-A3B", "--adapter", f"mine={adapter}"]
    result = invoke([*args, "--plan", _plan_file(tmp_path, 2), "--out", str(out), "--json"])
    assert_clean_error(result, f"adapter mine has LoRA on 'lm_head' (target_modules), {REFUSED}")
    assert not out.exists()


def test_render_serve_refuses_it(tmp_path):
    plan = lora_plan({"e": _adapter(tmp_path, "model.embed_tokens")}, "triton", tp_size=2)
    with pytest.raises(
        RenderError, match="tensor_parallel_size 2\\): adapter e has LoRA on 'model.embed_tokens'"
    ):
        render_serve(plan, name="q", model_path="/m", weight_path="/w")


def test_one_gpu_or_no_vocab_lora_is_served(tmp_path):
    vocab = _adapter(tmp_path, "q_proj", "embed_tokens", "lm_head")
    result = invoke(["lora", "plan", "--plan", _plan_file(tmp_path, 1), "--adapter", f"e={vocab}", "--json"])
    assert result.exit_code == 0, result.output
    render_serve(lora_plan({"e": vocab}), name="q", model_path="/m", weight_path="/w")
    attention = _adapter(tmp_path / "b", "q_proj", "v_proj")
    result = invoke(["lora", "plan", "--plan", _plan_file(tmp_path, 2), "--adapter", f"e={attention}"])
    assert result.exit_code == 0, result.output
    served = invoke([*serve_args(attention), "--dry-run", "--json"])
    assert served.exit_code == 0, served.output
    render_serve(lora_plan({"e": attention}, tp_size=2), name="q", model_path="/m", weight_path="/w")
