"""render serve: the LoRA backend of serve.lora is one SGLang runs on the NVIDIA GPUs ktinfra serves on.

sglang-kt 0.7.2 lists "ascend" in LORA_BACKEND_CHOICES, but lora/backend/ascend_backend.py runs
torch.ops.npu.sgmv_* kernels (Ascend NPUs, torch_npu): on a CUDA host the server loads the model and then
fails in its first LoRA batch. And a backend of "" / false / [] is not the default's null.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError, render_serve, sglang_argv

SEED002 = "seed002-qwen3-30b-a3b-serve.json"


def _lora_plan(backend: object) -> dict:
    plan = load_fixture_plan(SEED002)
    plan["serve"].update(
        kt_num_gpu_experts=0,
        kt_gpu_prefill_token_threshold=None,
        lora={"paths": {"a": "/srv/lora/a"}, "max_loras_per_batch": 1, "backend": backend},
    )
    return plan


def test_ascend_backend_is_refused_with_the_reason():
    with pytest.raises(RenderError, match="'ascend' is SGLang's LoRA backend for Ascend NPUs") as caught:
        sglang_argv(_lora_plan("ascend"), model_path="/m", weight_path="/w")
    assert "use one of triton, csgmv, torch_native" in str(caught.value)


@pytest.mark.parametrize("backend", ["", False, [], 0])
def test_empty_backend_values_are_not_read_as_the_default(backend):
    with pytest.raises(RenderError, match="lora.backend .* is not one of triton, csgmv, torch_native"):
        sglang_argv(_lora_plan(backend), model_path="/m", weight_path="/w")


@pytest.mark.parametrize(
    ("backend", "flag"), [(None, "triton"), ("csgmv", "csgmv"), ("torch_native", "torch_native")]
)
def test_gpu_backends_render(backend, flag):
    rendered = render_serve(_lora_plan(backend), name="q", model_path="/m", weight_path="/w")
    assert rendered.info["argv"][-2:] == ["--lora-backend", flag]


def test_cli_refuses_ascend_before_writing(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(_lora_plan("ascend")))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ktinfra", "render", "serve", "--plan", str(plan_file), "--name", "q"]
    cmd += ["--model-path", "/m", "--weight-path", "/w", "--out", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Ascend NPUs" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert not out.exists() or not any(out.iterdir())
