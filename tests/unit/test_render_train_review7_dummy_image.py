"""render train leaves kt-kernel room for the dummy image that LLaMA-Factory's qwen3_vl-plugin templates add
to a text-only batch (data/collator.py), past the cutoff_len x batch that llamafactory-kt sizes kt-kernel's
token buffer for: kt-kernel stopped the run with "qlen (...) exceeds chunked_prefill_size"."""

from __future__ import annotations

import pytest
import yaml
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError
from ktinfra.render.train import render_train

CURRENT = "h100-qwen3-30b-a3b-sft-current.json"
ARGS = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}


def _kt_config(tmp_path, plan: dict, **more) -> dict:
    args = {"python": str(tmp_path / "absent" / "bin" / "python"), "llamafactory_dir": str(tmp_path / "lf")}
    rendered = render_train(plan, **ARGS, **args, **more)
    return yaml.safe_load(rendered.files["r.yaml"][0])["kt_config"]


def _plan(architecture: str = "qwen3_5_moe", cutoff_len: int = 2048, batch: int = 1) -> dict:
    plan = load_fixture_plan(CURRENT)
    plan["model"]["architecture"] = architecture
    plan["sft"] |= {"cutoff_len": cutoff_len, "per_device_train_batch_size": batch, "template": None}
    return plan


@pytest.mark.parametrize(
    ("architecture", "cutoff_len", "batch", "expected"),
    [
        ("qwen3_5_moe", 2048, 1, 2176),  # upstream's qwen3_5moe_lora_sft_kt.yaml
        ("qwen3_vl_moe", 4096, 2, 2 * 4224),
        ("qwen3_5_moe", 1000, 1, 1128),
    ],
)
def test_a_dummy_image_template_gets_room_in_kt_model_max_length(
    tmp_path, architecture, cutoff_len, batch, expected
):
    assert _kt_config(tmp_path, _plan(architecture, cutoff_len, batch))["kt_model_max_length"] == expected


def test_a_given_template_with_a_dummy_image_gets_room_too(tmp_path):
    config = _kt_config(tmp_path, _plan("qwen3_moe"), template="qwen3_vl_nothink")
    assert config["kt_model_max_length"] == 2176


def test_text_templates_leave_kt_model_max_length_to_llamafactory(tmp_path):
    assert "kt_model_max_length" not in _kt_config(tmp_path, _plan("qwen3_moe"))


def test_a_planned_kt_model_max_length_with_room_is_kept_and_one_without_is_refused(tmp_path):
    plan = _plan()
    plan["sft"]["kt"]["kt_config"]["kt_model_max_length"] = 4096
    assert _kt_config(tmp_path, plan)["kt_model_max_length"] == 4096
    plan["sft"]["kt"]["kt_config"]["kt_model_max_length"] = 2048
    with pytest.raises(RenderError, match=r"kt_model_max_length 2048 leaves no room .* needs 2176 tokens"):
        _kt_config(tmp_path, plan)
