"""`ktinfra render serve` checks serve.lora's adapters against its backend as `lora plan` / `lora serve` do.

A plan whose serve.lora names an adapter with embed_tokens in target_modules and backend csgmv (edited by
hand, or planned by `plan --lora`, which has no backend check) rendered with exit 0, although only SGLang's
triton backend runs embedding LoRA (backend/triton_backend.py run_lora_a_embedding; the server fails on its
first forward). Render now runs the same function, lora.check_lora_backend, on each adapter readable here."""

from __future__ import annotations

import json

import pytest
from test_lora import peft_dir
from test_lora_cli_errors import invoke
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError, render_serve

SEED002 = "seed002-qwen3-30b-a3b-serve.json"


def _adapter(tmp_path, *targets: str):
    adapter = peft_dir(tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps(config | {"target_modules": list(targets)}))
    return adapter


def lora_plan(paths: dict, backend: str = "triton", tp_size: int = 1) -> dict:
    plan = load_fixture_plan(SEED002)
    plan["serve"].update(
        kt_num_gpu_experts=0,
        kt_gpu_prefill_token_threshold=None,
        tensor_parallel_size=tp_size,
        gpu_indices=list(range(tp_size)) if tp_size == 1 else None,
        lora={"paths": {k: str(v) for k, v in paths.items()}, "max_loras_per_batch": 1, "backend": backend},
    )
    return plan


@pytest.mark.parametrize("backend", ["csgmv", "torch_native"])
def test_render_serve_refuses_embedding_lora_off_triton(tmp_path, backend):
    adapter = _adapter(tmp_path, "q_proj", "model.embed_tokens")
    with pytest.raises(RenderError) as caught:
        render_serve(lora_plan({"e": adapter}, backend), name="q", model_path="/m", weight_path="/w")
    said = str(caught.value)
    assert said.startswith(f"plan serve.lora (backend {backend}, tensor_parallel_size 1): adapter e has LoRA")
    assert "'model.embed_tokens' in target_modules" in said and "pass --lora-backend triton" in said


def test_render_serve_cli_refuses_it_before_writing(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(lora_plan({"e": _adapter(tmp_path, "embed_tokens")}, "csgmv")))
    out = tmp_path / "out"
    args = ["render", "serve", "--plan", str(plan_file), "--name", "q", "--model-path", "/m"]
    result = invoke([*args, "--weight-path", "/w", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "adapter e has LoRA on the input embedding" in result.output
    assert "Traceback" not in result.output and not out.exists()


@pytest.mark.parametrize(
    ("targets", "backend"),
    [(["embed_tokens"], "triton"), (["lm_head"], "torch_native"), (["q_proj"], "csgmv")],
)
def test_what_the_backend_runs_renders(tmp_path, targets, backend):
    plan = lora_plan({"e": _adapter(tmp_path, *targets)}, backend)
    argv = render_serve(plan, name="q", model_path="/m", weight_path="/w").info["argv"]
    assert argv[-2:] == ["--lora-backend", backend]


def test_an_adapter_not_on_this_host_renders(tmp_path):
    plan = lora_plan({"far": tmp_path / "elsewhere"}, "csgmv")
    argv = render_serve(plan, name="q", model_path="/m", weight_path="/w").info["argv"]
    assert f"far={tmp_path / 'elsewhere'}" in argv
