"""Follow-ups of `ktinfra plan --mode sft --expert-format fp8` (883f944) in the planner: the --cpu-format
refusal in sft said "SFT reads BF16 experts", plan() took expert_format in serve mode without a word, and a
[128, 64] block checkpoint passed though kt-kernel's FP8 LoRA needs [128, 128]."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import catalog
from ktinfra.cli import app
from ktinfra.planner import PlanInputError, load_facts, plan

HOST = Path(__file__).resolve().parents[1] / "fixtures" / "facts" / "dual-spr-2xnuma-4xl40s.json"


def _facts() -> dict:
    return load_facts(str(HOST))


def _local_v3(tmp_path: Path, block: list[int]) -> str:
    config = copy.deepcopy(catalog.entry_config("DeepSeek-V3"))
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": block}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


# --- 1: --cpu-format in sft mode names the way to FP8 experts ---------------------------------------------


def test_cpu_format_in_sft_points_to_expert_format_fp8():
    with pytest.raises(PlanInputError) as caught:
        plan(_facts(), "DeepSeek-V3", "sft", cpu_format="FP8")
    message = str(caught.value)
    assert message.startswith("--cpu-format applies to serve; ")
    assert "--expert-format fp8" in message and "SFT reads BF16 experts" not in message


# --- 2: plan() refuses expert_format in serve mode, as the CLI does -----------------------------------------


@pytest.mark.parametrize("asked", ["fp8", "bf16"])
def test_plan_api_refuses_expert_format_in_serve(asked):
    with pytest.raises(PlanInputError, match="^--expert-format applies to --mode sft, not --mode serve$"):
        plan(_facts(), "DeepSeek-V3", "serve", expert_format=asked)


def test_plan_docstring_lists_expert_format():
    assert "expert_format" in plan.__doc__


def test_cli_gives_the_same_error_for_expert_format_in_serve():
    done = CliRunner().invoke(
        app, ["plan", "-m", "DeepSeek-V3", "--facts", str(HOST), "--mode", "serve", "--expert-format", "fp8"]
    )
    assert done.exit_code == 1 and "--expert-format applies to --mode sft, not --mode serve" in done.output


# --- 4: both numbers of weight_block_size ---------------------------------------------------------------


def _block(model: str) -> tuple:
    arch = catalog.resolve(model)
    return arch.fp8_block_n, arch.fp8_block_k


def test_catalog_keeps_both_numbers_of_the_weight_block(tmp_path):
    assert _block("DeepSeek-V3") == (128, 128)
    assert _block("Qwen3-30B-A3B") == (None, None)
    model = _local_v3(tmp_path, [128, 64])
    assert _block(model) == (128, 64)  # serving's tensor-parallel split reads n, as before


def test_fp8_sft_of_a_128_by_64_block_checkpoint_is_bad_input(tmp_path):
    model = _local_v3(tmp_path, [128, 64])
    with pytest.raises(PlanInputError, match=r"128x128 block FP8 only; .* has weight_block_size \[128, 64\]"):
        plan(_facts(), model, "sft", expert_format="fp8")
    done = CliRunner().invoke(
        app, ["plan", "-m", model, "--facts", str(HOST), "--mode", "sft", "--expert-format", "FP8"]
    )
    assert done.exit_code == 1 and "weight_block_size [128, 64]" in done.output


def test_a_128_by_64_block_checkpoint_still_plans_bf16_sft_and_fp8_serving(tmp_path):
    model = _local_v3(tmp_path, [128, 64])
    assert plan(_facts(), model, "sft")["sft"]["checkpoint_dtype"] == "bf16"
    assert plan(_facts(), model, "serve")["serve"]["checkpoint_dtype"] == "fp8"


def test_a_128_by_128_block_checkpoint_plans_fp8_sft(tmp_path):
    result = plan(_facts(), _local_v3(tmp_path, [128, 128]), "sft", expert_format="fp8")
    assert result["sft"]["checkpoint_dtype"] == "fp8"


def test_the_bf16_plan_of_a_128_by_64_block_checkpoint_does_not_offer_fp8(tmp_path):
    """Before, the default plan's reason said '--expert-format fp8 trains the FP8 experts in place instead
    ... less RAM', an option plan() then refused for this very checkpoint."""
    reason = plan(_facts(), _local_v3(tmp_path, [128, 64]), "sft")["reasons"]["checkpoint_dtype"]
    assert "weight_block_size [128, 64]" in reason, reason
    assert "less RAM" not in reason, reason
    (tmp_path / "b").mkdir()
    reason = plan(_facts(), _local_v3(tmp_path / "b", [128, 128]), "sft")["reasons"]["checkpoint_dtype"]
    assert "--expert-format fp8" in reason and "less RAM" in reason, reason


def test_models_lists_sft_fp8_only_where_kt_kernel_can_read_the_blocks(tmp_path):
    from ktinfra import sizing

    assert "sft:FP8" in sizing.table(catalog.resolve("DeepSeek-V3"))
    assert "sft:FP8" not in sizing.table(catalog.resolve(_local_v3(tmp_path, [128, 64])))
