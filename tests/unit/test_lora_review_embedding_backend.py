"""LoRA on the input embedding (embed_tokens in target_modules) on a backend other than triton: SGLang
(sglang-kt 0.7.2 and the legacy fork) wraps embed_tokens for such an adapter, and its LoRA A is an embedding
lookup only backend/triton_backend.py implements (run_lora_a_embedding); csgmv and torch_native inherit
base_backend.py's stub returning None, so the server fails on its first forward. `lora serve` rendered and
`lora plan` planned it with exit 0. lm_head LoRA runs on lora_A/lora_B matmuls every backend has: accepted."""

from __future__ import annotations

import json

import pytest
from test_lora import H100, peft_dir, serve_args
from test_lora_cli_errors import assert_clean_error, invoke


def _adapter(tmp_path, *targets):
    adapter = peft_dir(tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps(config | {"target_modules": list(targets)}))
    return adapter


def _plan(tmp_path) -> str:
    res = invoke(["plan", "--model", "Qwen3-30B-A3B", "--from", str(H100), "--json"])
    path = tmp_path / "plan.json"
    path.write_text(res.stdout)
    return str(path)


@pytest.mark.parametrize("embedding", ["embed_tokens", "model.embed_tokens", "word_embeddings"])
@pytest.mark.parametrize("backend", ["csgmv", "torch_native"])
def test_lora_serve_refuses_embedding_lora_off_triton(tmp_path, embedding, backend):
    adapter = _adapter(tmp_path, "q_proj", embedding)
    bundle = tmp_path / "bundle"
    result = invoke([*serve_args(adapter, "--lora-backend", backend), "--out", str(bundle), "--json"])
    assert_clean_error(
        result, f"adapter mine has LoRA on the input embedding ({embedding!r} in target_modules)"
    )
    assert (
        f"{backend} LoRA backend cannot run" in result.output
        and "pass --lora-backend triton" in result.output
    )
    assert not bundle.exists()


def test_lora_plan_refuses_embedding_lora_on_csgmv(tmp_path):
    adapter = _adapter(tmp_path, "q_proj", "embed_tokens")
    args = ["lora", "plan", "--plan", _plan(tmp_path), "--adapter", f"e={adapter}", "--lora-backend", "csgmv"]
    assert_clean_error(invoke(args), "adapter e has LoRA on the input embedding")


@pytest.mark.parametrize(
    ("targets", "backend"),
    [(["q_proj", "embed_tokens"], "triton"), (["q_proj", "lm_head"], "torch_native"), (["q_proj"], "csgmv")],
)
def test_what_the_backend_runs_is_planned(tmp_path, targets, backend):
    adapter = _adapter(tmp_path, *targets)
    args = ["lora", "plan", "--plan", _plan(tmp_path), "--adapter", f"e={adapter}", "--lora-backend", backend]
    result = invoke([*args, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["serve"]["lora"]["backend"] == backend
    served = invoke([*serve_args(adapter, "--lora-backend", backend), "--dry-run", "--json"])
    assert served.exit_code == 0, served.output
