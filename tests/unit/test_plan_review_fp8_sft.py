"""SFT of a model that ships block FP8 (DeepSeek-V3, Kimi-K2) on its FP8 experts: kt-kernel 0.7.2 trains LoRA
on them in place (kt_backend FP8, method AMXFP8_SFT), but the planner always planned seed 000's BF16 cast, so
RAM held 2 bytes per expert weight and disk a BF16 copy: DeepSeek-V3 needed 1363 GB RAM, more than a 1 TiB
host has, where the FP8 run needs 710 GB. BF16 stays the default; `--expert-format fp8` asks for the other."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import catalog, sizing
from ktinfra.cli import app
from ktinfra.plan.host import gb
from ktinfra.planner import PlanInputError, load_facts, plan

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
HOST = FACTS / "dual-spr-2xnuma-4xl40s.json"  # 1 TiB RAM, 2 NUMA nodes, 4 x L40S, 7 TB free on /data
FP8_MODELS = [m.name for m in catalog.list_models() if m.native_dtype == "fp8"]


def _facts() -> dict:
    return load_facts(str(HOST))


def _fp8_ram(arch) -> float:
    """1 byte per routed-expert weight + one fp32 scale per 128x128 block, expert LoRA state, runtime."""
    experts = arch.routed_expert_params * (1 + 4 / (128 * 128))
    lora = 3 * sizing.SFT_LORA_RANK * (arch.hidden_size + arch.moe_intermediate_size)
    lora *= arch.num_experts * arch.num_moe_layers * sizing.LORA_STATE_BYTES
    return experts + lora + sizing.HOST_RUNTIME_RAM


def test_fp8_models_are_in_the_catalog():
    assert {"DeepSeek-V3", "Kimi-K2"} <= set(FP8_MODELS)


@pytest.mark.parametrize("model", FP8_MODELS)
def test_sizing_fp8_experts_hold_one_byte_and_block_scales_and_no_bf16_copy(model):
    arch = catalog.resolve(model)
    bf16 = sizing.sft(arch)
    fp8 = sizing.sft(arch, expert_dtype="fp8")
    assert fp8.breakdown["cpu_experts"] == int(arch.routed_expert_params * (1 + 4 / (128 * 128)))
    assert fp8.ram_bytes == int(_fp8_ram(arch))
    assert fp8.breakdown["bf16_conversion"] == 0
    assert bf16.breakdown["bf16_conversion"] == int(sizing.download_bytes(arch, "bf16"))
    assert fp8.disk_bytes == int(fp8.breakdown["download"] + fp8.breakdown["outputs"])
    assert abs(bf16.disk_bytes - fp8.disk_bytes - sizing.download_bytes(arch, "bf16")) <= 1  # int() rounding
    assert fp8.vram_bytes == bf16.vram_bytes  # LLaMA-Factory dequantizes the GPU's weights to BF16 either way


def test_sizing_refuses_fp8_experts_of_a_bf16_model():
    with pytest.raises(ValueError, match="ships bf16"):
        sizing.sft(catalog.resolve("Qwen3-30B-A3B"), expert_dtype="fp8")


def test_default_plan_stays_bf16_and_offers_fp8_with_its_savings():
    arch = catalog.resolve("DeepSeek-V3")
    result = plan(_facts(), "DeepSeek-V3", "sft")
    sft = result["sft"]
    assert sft["checkpoint_dtype"] == "bf16"
    assert sft["kt"]["kt_config"]["kt_backend"] == "AMXBF16"
    assert sft["kt"]["kt_config"]["kt_expert_weight_format"] == "bf16"
    bf16 = sizing.sft(arch, cutoff_len=sft["cutoff_len"], batch_size=sft["per_device_train_batch_size"])
    assert result["requirements"]["ram_bytes"] == bf16.ram_bytes
    assert result["feasible"] is False  # 2 bytes per expert weight do not fit in 1 TiB
    assert any(p.startswith(f"needs {gb(bf16.ram_bytes)} RAM") for p in result["problems"])
    saved_ram = gb(bf16.ram_bytes - int(_fp8_ram(arch)))
    copy_size = gb(sizing.download_bytes(arch, "bf16"))
    assert result["reasons"]["checkpoint_dtype"].endswith(
        f"--expert-format fp8 trains the FP8 experts in place instead (kt-kernel AMXFP8_SFT): {saved_ram} "
        f"less RAM and no {copy_size} BF16 copy on disk"
    )


@pytest.mark.parametrize("asked", ["fp8", "FP8", " Fp8 "])
def test_fp8_plan_keys_and_numbers(asked):
    arch = catalog.resolve("DeepSeek-V3")
    result = plan(_facts(), "DeepSeek-V3", "sft", expert_format=asked)
    sft = result["sft"]
    assert sft["checkpoint_dtype"] == "fp8"
    config = sft["kt"]["kt_config"]
    assert (config["kt_backend"], config["kt_expert_weight_format"]) == ("FP8", "fp8")
    assert config["kt_share_backward_bb"] is True  # kt-kernel 0.7.2: FP8 SFT requires it
    assert (
        "kt_num_gpu_experts" not in config and "kt_weight_lifecycle" not in config
    )  # its defaults: 0, persistent
    assert result["requirements"]["ram_bytes"] == int(_fp8_ram(arch))
    assert result["requirements_breakdown"]["bf16_conversion"] == 0
    download = sizing.download_bytes(arch)
    adapter = sizing.lora_params_gpu(arch, 8) + sizing.lora_params_experts(arch, 8)
    outputs = adapter * sizing.LORA_STATE_BYTES * sizing.SFT_SAVED_CHECKPOINTS + sizing.SFT_OUTPUT_DISK
    assert result["requirements"]["disk_bytes"] == int(download + outputs)
    bf16 = sizing.sft(arch, cutoff_len=sft["cutoff_len"], batch_size=sft["per_device_train_batch_size"])
    assert result["requirements"]["vram_bytes"] == bf16.vram_bytes
    assert result["feasible"] is True, result["problems"]
    assert "AMXFP8_SFT" in result["reasons"]["kt"] and "no BF16 copy" in result["reasons"]["checkpoint_dtype"]


def test_bf16_asked_by_name_is_the_default_plan():
    facts = _facts()
    assert plan(facts, "DeepSeek-V3", "sft", expert_format="bf16") == plan(facts, "DeepSeek-V3", "sft")


@pytest.mark.parametrize(
    ("model", "stack", "options", "message"),
    [
        ("Qwen3-30B-A3B", "kt-0.7", {}, "ships bf16: it has no FP8 experts"),
        ("Kimi-K2-Thinking", "kt-0.7", {}, "ships int4: it has no FP8 experts"),
        ("DeepSeek-V3", "kt-0.4-autodl", {}, "legacy stack kt-0.4-autodl trains BF16 experts only"),
    ],
)
def test_fp8_where_kt_kernel_cannot_is_bad_input(model, stack, options, message):
    with pytest.raises(PlanInputError, match=message):
        plan(_facts(), model, "sft", stack=stack, expert_format="fp8", **options)


def test_an_unknown_expert_format_is_bad_input():
    with pytest.raises(PlanInputError, match="--expert-format must be one of bf16, fp8, got 'int8'"):
        plan(_facts(), "DeepSeek-V3", "sft", expert_format="int8")


def test_legacy_default_says_why_fp8_is_not_offered():
    result = plan(_facts(), "DeepSeek-V3", "sft", stack="kt-0.4-autodl")
    assert result["sft"]["checkpoint_dtype"] == "bf16"
    reason = result["reasons"]["checkpoint_dtype"]
    assert "trains BF16 experts only" in reason and "--expert-format fp8 trains" not in reason


def _local_v3(tmp_path: Path, **changes) -> str:
    config = copy.deepcopy(catalog.entry_config("DeepSeek-V3"))
    config.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"moe_intermediate_size": 1400}, "multiples of 128; .* has moe_intermediate_size 1400"),
        (
            {"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [64, 64]}},
            r"128x128 block FP8 only; .* has weight_block_size \[64, 64\]",
        ),
    ],
)
def test_fp8_layouts_kt_kernel_refuses_are_bad_input(tmp_path, changes, message):
    with pytest.raises(PlanInputError, match=message):
        plan(_facts(), _local_v3(tmp_path, **changes), "sft", expert_format="fp8")


def test_pools_that_split_the_experts_off_128_blocks_are_a_problem(tmp_path):
    # 2 NUMA pools: 2176 = 17 x 128 rows split into 1088, not a multiple of 128 (kt-kernel sft/amx.py)
    model = _local_v3(tmp_path, moe_intermediate_size=2176)
    result = plan(_facts(), model, "sft", expert_format="fp8")
    assert result["sft"]["kt"]["kt_config"]["kt_threadpool_count"] == 2
    assert result["feasible"] is False
    assert any(
        "splits moe_intermediate_size 2176 over the 2 NUMA thread pools" in p for p in result["problems"]
    )
    bf16 = plan(_facts(), model, "sft")
    assert not any("NUMA thread pools into slices" in p for p in bf16["problems"])


def test_cli_expert_format():
    base = ["plan", "-m", "DeepSeek-V3", "--facts", str(HOST)]
    done = CliRunner().invoke(app, [*base, "--mode", "sft", "--expert-format", "fp8", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["sft"]["checkpoint_dtype"] == "fp8"
    serve = CliRunner().invoke(app, [*base, "--mode", "serve", "--expert-format", "fp8"])
    assert serve.exit_code == 1 and "--expert-format applies to --mode sft" in serve.output
    legacy = CliRunner().invoke(
        app, [*base, "--mode", "sft", "--stack", "kt-0.4-autodl", "--expert-format", "fp8"]
    )
    assert legacy.exit_code == 1 and "legacy stack" in legacy.output
