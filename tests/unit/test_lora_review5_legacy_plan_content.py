"""A legacy-stack plan's adapters get the same content checks as a current-stack plan's.

`render serve`, `lora plan` and `plan --lora` skipped lora.check_planned_adapter on a legacy-stack plan
("the legacy stack converts every adapter first"), so only target_modules was read, for the backend check.
But serve.lora.paths is what the server loads (render converts nothing; `lora serve --legacy` plans the
converter's output), and the legacy fork (eaf832e) reads an adapter as sglang-kt does: it skips LoRA of an
embed_tokens/lm_head that target_modules does not name (srt/lora/lora.py), stops at start on a
target_modules string (lora_manager.py init_lora_shapes) and serves no fused KT expert LoRA. A legacy plan
naming such an adapter rendered with exit 0. The adapters readable here are now read from disk on either
stack; one not on this host still renders."""

from __future__ import annotations

import json

import pytest
from safetensors_file import write_safetensors
from test_lora import H100, kt_dir, peft_dir
from test_lora_cli_errors import invoke
from test_lora_review2_render_backend import lora_plan
from test_lora_review4_render_planned import EMBEDDING_LORA

from ktinfra.render import RenderError, render_serve


def _undeclared_embedding(tmp_path):
    adapter = peft_dir(tmp_path / "a")  # target_modules ["q_proj", "v_proj"]
    write_safetensors(adapter / "adapter_model.safetensors", EMBEDDING_LORA)
    return adapter


def _string_targets(tmp_path):
    adapter = peft_dir(tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps(config | {"target_modules": "all-linear"}))
    return adapter


def _dora(tmp_path):
    adapter = peft_dir(tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps(config | {"use_dora": True}))
    return adapter


CASES = [
    (_undeclared_embedding, "does not name embed_tokens, but adapter_model.safetensors holds its LoRA"),
    (_string_targets, "target_modules is the string 'all-linear'"),
    (_dora, "use_dora is set"),
    (lambda tmp_path: kt_dir(tmp_path / "a"), "which the legacy stack's sglang fork does not serve"),
]
IDS = ["config-and-tensors-disagree", "target-modules-string", "dora", "kt-training-output"]


def _legacy_plan(paths: dict) -> dict:
    plan = lora_plan(paths)  # the seed002 fixture is a legacy-stack plan
    assert plan["stack_generation"] == "legacy"
    return plan


@pytest.mark.parametrize(("make", "said"), CASES, ids=IDS)
def test_render_serve_reads_a_legacy_plans_adapters(tmp_path, make, said):
    with pytest.raises(RenderError) as caught:
        render_serve(_legacy_plan({"e": make(tmp_path)}), name="q", model_path="/m", weight_path="/w")
    assert str(caught.value).startswith("plan serve.lora.paths.e: ")
    assert said in str(caught.value)


def test_render_serve_cli_refuses_it_before_writing(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(_legacy_plan({"e": _string_targets(tmp_path)})))
    out = tmp_path / "out"
    args = ["render", "serve", "--plan", str(plan_file), "--name", "q", "--model-path", "/m"]
    result = invoke([*args, "--weight-path", "/w", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "plan serve.lora.paths.e:" in result.output and "'all-linear'" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_lora_plan_reads_them_too(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan = _legacy_plan({})
    del plan["serve"]["lora"]
    plan_file.write_text(json.dumps(plan))
    adapter = _dora(tmp_path)
    result = invoke(["lora", "plan", "--plan", str(plan_file), "--adapter", f"e={adapter}", "--json"])
    assert result.exit_code == 1, result.output
    assert "use_dora is set" in result.output and "Traceback" not in result.output


def test_a_sound_adapter_and_one_elsewhere_still_render(tmp_path):
    plan = _legacy_plan({"p": peft_dir(tmp_path / "p"), "far": tmp_path / "elsewhere"})
    argv = render_serve(plan, name="q", model_path="/m", weight_path="/w").info["argv"]
    assert f"p={tmp_path / 'p'}" in argv and f"far={tmp_path / 'elsewhere'}" in argv


def test_plan_lora_on_the_legacy_stack_reads_them_too(tmp_path):
    args = ["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--stack", "kt-0.4-autodl", "--json"]
    result = invoke([*args, "--lora", f"e={_dora(tmp_path)}"])
    assert result.exit_code == 1, result.output
    assert "--lora e: " in result.output and "use_dora is set" in result.output
    sound = invoke([*args, "--lora", f"e={peft_dir(tmp_path / 'p')}"])
    assert sound.exit_code == 2, sound.output  # planned; only the disk is too small for the legacy stack
    assert json.loads(sound.stdout)["serve"]["lora"]["paths"] == {"e": str(tmp_path / "p")}
