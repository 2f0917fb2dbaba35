"""render train: each quantized expert format's rules, as kt-kernel 0.7.2's KTConfig.__post_init__
(sft/config.py) checks them once the run starts. Only INT8's were checked: an FP8, RAWINT4 or MXFP4 recipe,
or an ephemeral lifecycle on other than INT8, rendered and stopped the run with a ValueError."""

from __future__ import annotations

import pytest
import yaml
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError
from ktinfra.render.train import render_train

CURRENT = "h100-qwen3-30b-a3b-sft-current.json"
ARGS = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}
FP8 = {"kt_backend": "FP8", "kt_expert_weight_format": "fp8"}
RAWINT4 = {"kt_backend": "RAWINT4", "kt_expert_weight_format": "rawint4", "kt_share_backward_bb": False,
           "kt_force_fused_expert_lora": True}  # fmt: skip


def _plan(config: dict, sft: dict | None = None, kt: dict | None = None) -> dict:
    plan = load_fixture_plan(CURRENT)
    plan["sft"]["kt"]["kt_config"].update(config)
    plan["sft"]["kt"]["kt_config"] = {
        k: v for k, v in plan["sft"]["kt"]["kt_config"].items() if v is not None
    }
    plan["sft"].update(sft or {})
    plan["sft"]["kt"].update(kt or {})
    return plan


@pytest.mark.parametrize(
    ("config", "sft", "kt", "message"),
    [
        ({**FP8, "kt_share_backward_bb": False}, {}, {}, "FP8 .* only with kt_share_backward_bb: true"),
        ({**FP8, "kt_num_gpu_experts": 2}, {}, {}, "FP8 experts .* only with kt_num_gpu_experts: 0"),
        ({**FP8}, {}, {"kt_use_lora_experts": True}, "FP8 experts .* only with no kt_use_lora_experts"),
        ({**FP8, "kt_weight_lifecycle": "ephemeral"}, {}, {}, "ephemeral is for INT8 .kt weights only"),
        ({"kt_weight_lifecycle": "ephemeral"}, {}, {}, "ephemeral is for INT8 .kt weights only.*bf16"),
        ({"kt_backend": "RAWINT4", "kt_expert_weight_format": "rawint4"}, {}, {},
         "RAWINT4 experts .* only with kt_share_backward_bb: false, kt_force_fused_expert_lora: true"),
        ({"kt_backend": "AMXINT4_KGroup", "kt_expert_weight_format": None}, {}, {},  # kt-kernel: rawint4
         "RAWINT4 experts .* only with kt_share_backward_bb: false"),
        ({**RAWINT4}, {"lora_rank": 16, "lora_alpha": 32}, {}, "RAWINT4 experts .* only with lora_rank 8"),
        ({**RAWINT4}, {"lora_dropout": 0.05}, {}, "RAWINT4 experts .* only with lora_dropout 0"),
        ({**RAWINT4, "kt_tp_enabled": True, "kt_threadpool_count": 4}, {}, {}, "only with 1 or 2 NUMA pools"),
        ({**RAWINT4}, {}, {"kt_expert_checkpoint_path": "/ckpt"}, "only with no kt_expert_checkpoint_path"),
        ({"kt_backend": "MXFP4", "kt_expert_weight_format": "mxfp4", "kt_share_backward_bb": False}, {}, {},
         "MXFP4 experts .* only with a kt_weight_path"),
    ],
)  # fmt: skip
def test_formats_kt_kernel_refuses_are_refused(config, sft, kt, message):
    with pytest.raises(RenderError, match=message):
        render_train(_plan(config, sft, kt), **ARGS)


@pytest.mark.parametrize(
    ("config", "sft"),
    [(FP8, {}), (RAWINT4, {}), ({**RAWINT4, "kt_tp_enabled": True, "kt_threadpool_count": 2}, {}),
     (RAWINT4, {"lora_rank": 8, "lora_dropout": 0.0}), ({}, {"lora_dropout": 0.1})],
)  # fmt: skip
def test_formats_kt_kernel_takes_render(config, sft):
    recipe = yaml.safe_load(render_train(_plan(config, sft), **ARGS).files["r.yaml"][0])
    for key, value in config.items():
        assert recipe["kt_config"][key] == value
