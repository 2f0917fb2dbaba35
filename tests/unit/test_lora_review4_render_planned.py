"""`ktinfra render serve` checks serve.lora's adapters as `lora plan` and `plan --lora` do.

Render ran only lora.check_lora_backend on them: a plan made elsewhere or edited by hand whose adapter's
adapter_config.json and tensors disagreed, or that named an unconverted KT training output (the fused expert
file, no per-expert tensors), rendered with exit 0, and sglang-kt stopped at start. Render now runs
lora.check_plan_adapters (check_planned_adapter, kt_lora_problems, check_lora_backend) on the adapters it can
read, before anything is written, naming the plan key; kt_lora_problems on the current stack only (the
per-adapter checks run on the legacy stack too: test_lora_review5_legacy_plan_content)."""

from __future__ import annotations

import json

import pytest
from safetensors_file import write_safetensors
from test_lora import kt_dir, merged_kt_dir, peft_dir
from test_lora_cli_errors import invoke
from test_lora_review2_render_backend import lora_plan

from ktinfra.render import RenderError, render_serve

EMBEDDING_LORA = {
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": [4, 64],
    "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": [64, 4],
    "base_model.model.model.embed_tokens.lora_embedding_A": [4, 128],
    "base_model.model.model.embed_tokens.lora_embedding_B": [64, 4],
}


def current_plan(paths: dict, backend: str = "triton") -> dict:
    plan = lora_plan(paths, backend)
    plan.update(stack="kt-0.7", stack_generation="current")
    return plan


def _render(plan: dict):
    return render_serve(plan, name="q", model_path="/m", weight_path="/w")


def _undeclared_embedding(tmp_path):
    """target_modules ["q_proj", "v_proj"] (peft_dir's), tensors with embed_tokens LoRA as well."""
    adapter = peft_dir(tmp_path / "a")
    write_safetensors(adapter / "adapter_model.safetensors", EMBEDDING_LORA)
    return adapter


def _string_targets(tmp_path):
    adapter = peft_dir(tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps(config | {"target_modules": "all-linear"}))
    return adapter


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (_undeclared_embedding, "does not name embed_tokens, but adapter_model.safetensors holds its LoRA"),
        (lambda tmp_path: kt_dir(tmp_path / "a"), "is a KT training output (fused_expert_lora.safetensors"),
        (_string_targets, "target_modules is the string 'all-linear'"),
    ],
    ids=["config-and-tensors-disagree", "unconverted-kt-output", "target-modules-string"],
)
def test_render_serve_refuses_what_lora_plan_refuses(tmp_path, make, said):
    with pytest.raises(RenderError) as caught:
        _render(current_plan({"e": make(tmp_path)}))
    assert str(caught.value).startswith("plan serve.lora.paths.e: ")
    assert said in str(caught.value)


def test_render_serve_cli_refuses_it_before_writing(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(current_plan({"e": kt_dir(tmp_path / "kt")})))
    out = tmp_path / "out"
    args = ["render", "serve", "--plan", str(plan_file), "--name", "q", "--model-path", "/m"]
    result = invoke([*args, "--weight-path", "/w", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "plan serve.lora.paths.e:" in result.output and "KT training output" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_a_merged_kt_adapter_is_served_alone(tmp_path):
    paths = {"kt": merged_kt_dir(tmp_path / "kt"), "p": peft_dir(tmp_path / "p")}
    with pytest.raises(RenderError, match=r"^plan serve.lora.paths: adapter kt carries LoRA on the routed"):
        _render(current_plan(paths))
    assert f"kt={paths['kt']}" in _render(current_plan({"kt": paths["kt"]})).info["argv"]


def test_the_legacy_stack_gets_the_adapter_checks_too(tmp_path):
    """serve.lora.paths is what the legacy fork loads too (test_lora_review5_legacy_plan_content)."""
    plan = lora_plan({"e": _undeclared_embedding(tmp_path)})  # the seed002 fixture is a legacy-stack plan
    assert plan["stack_generation"] == "legacy"
    with pytest.raises(RenderError, match=r"^plan serve.lora.paths.e: .*does not name embed_tokens"):
        _render(plan)


def test_what_lora_plan_accepts_renders_and_an_adapter_elsewhere_too(tmp_path):
    plan = current_plan({"p": peft_dir(tmp_path / "p"), "far": tmp_path / "elsewhere"})
    argv = _render(plan).info["argv"]
    assert f"p={tmp_path / 'p'}" in argv and f"far={tmp_path / 'elsewhere'}" in argv
