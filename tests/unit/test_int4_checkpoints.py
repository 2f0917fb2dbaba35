"""Checkpoints whose routed experts ship as int4 (compressed-tensors, e.g. Kimi-K2-Thinking): sized as
published and served by kt-kernel's RAWINT4 from the model directory, on the CPU and the GPU alike."""

import copy
import json

import pytest
from test_plan import facts as host

from ktinfra import catalog, sizing
from ktinfra.planner import PlanInputError, plan
from ktinfra.render import sglang_argv

MODEL = "/data/models/Kimi-K2-Thinking"


def test_kimi_k2_thinking_is_kimi_k2_with_int4_experts():
    thinking, k2 = catalog.resolve("moonshotai/Kimi-K2-Thinking"), catalog.resolve("Kimi-K2")
    assert (thinking.native_dtype, thinking.quant_group_size) == ("int4", 32)
    assert thinking.total_params == k2.total_params
    # half a byte per weight plus one bf16 scale per 32 for the experts; everything else bf16
    int4 = 0.5 + 2 / 32
    expected = thinking.non_expert_params * 2 + thinking.routed_expert_params * int4
    assert sizing.download_bytes(thinking) == pytest.approx(expected)
    assert sizing.download_bytes(thinking) == pytest.approx(594e9, rel=0.01)  # the tutorial's ~600 GB
    # one MoE layer of int4 experts: what layerwise prefill holds ("requires 9GB+ extra VRAM")
    assert sizing.gpu_expert_bytes(thinking, "int4") * thinking.num_experts == pytest.approx(9.5e9, rel=0.01)


def test_only_the_rawint4_row_is_tabled_for_an_int4_checkpoint():
    assert list(sizing.table(catalog.resolve("Kimi-K2-Thinking"))) == ["serve:RAWINT4", "sft:BF16"]
    assert "serve:RAWINT4" not in sizing.table(catalog.resolve("Kimi-K2"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_bits": 8}, "compressed-tensors other than pack-quantized symmetric int4 groups"),
        ({"strategy": "channel"}, "compressed-tensors other than pack-quantized symmetric int4 groups"),
        ({"symmetric": False}, "compressed-tensors other than pack-quantized symmetric int4 groups"),
    ],
)
def test_other_compressed_tensors_schemes_are_refused(tmp_path, change, message):
    config = copy.deepcopy(catalog.entry_config("Kimi-K2-Thinking"))
    config["quantization_config"]["config_groups"]["group_0"]["weights"].update(change)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(catalog.ModelConfigError, match=message):
        catalog.resolve(str(tmp_path))


@pytest.mark.parametrize("facts", ["dual-spr-2xnuma-4xl40s", "xeon8352v-4090-noamx"])
def test_rawint4_is_the_backend_with_or_without_amx(facts):
    result = plan(host(facts), "Kimi-K2-Thinking", "serve")
    assert result["serve"]["kt_method"] == "RAWINT4"
    assert result["serve"]["checkpoint_dtype"] == "int4"
    assert "AMX is not needed" in result["reasons"]["kt_method"]


def test_without_avx512_rawint4_needs_avx_vnni():
    facts = host("xeon8352v-4090-noamx")
    # an Alder Lake / Zen 5-like CPU: AVX2, FMA and AVX-VNNI, no AVX-512
    facts["cpu"]["isa"].update(avx512f=False, avx512bw=False, fma=True, avx_vnni=True)
    result = plan(facts, "Kimi-K2-Thinking", "serve")
    assert result["serve"]["kt_method"] == "RAWINT4" and not any("RAWINT4" in p for p in result["problems"])
    assert result["reasons"]["kt_method"].endswith(
        "without avx512f, avx512bw kt-kernel runs its slower AVX-VNNI-256 RAWINT4 backend"
    )
    # a Zen 3-like CPU: kt-kernel would fall back to its plain AVX2 backend, which crashed on the H100 host
    facts["cpu"]["isa"]["avx_vnni"] = False
    result = plan(facts, "Kimi-K2-Thinking", "serve")
    assert result["problems"][0].startswith("RAWINT4 needs AVX512F+AVX512BW, or AVX2+FMA+AVX-VNNI")
    assert result["problems"][0].endswith("this CPU lacks avx512f, avx512bw and avx_vnni")


def test_the_4xl40s_plan_serves_from_the_model_directory_with_layerwise_prefill():
    result = plan(host("dual-spr-2xnuma-4xl40s"), "Kimi-K2-Thinking", "serve")
    assert result["feasible"], result["problems"]
    serve, breakdown = result["serve"], result["requirements_breakdown"]
    assert breakdown["cpu_weights_on_disk"] == 0  # nothing to convert
    assert result["requirements"]["ram_bytes"] == breakdown["cpu_experts"] + breakdown["host_runtime"]
    assert serve["kt_gpu_prefill_token_threshold"] == 2048
    assert "9.5 GB held for layerwise prefill" in result["reasons"]["kt_num_gpu_experts"]
    argv = sglang_argv(result, model_path=MODEL, weight_path=None)
    assert argv[argv.index("--kt-method") + 1] == "RAWINT4"
    assert argv[argv.index("--kt-weight-path") + 1] == MODEL  # the tutorial: the same directory for both


def test_other_formats_cannot_read_int4_experts():
    # bad input like FP8 on a bf16 checkpoint (PlanInputError, exit 1), no longer an infeasible plan
    with pytest.raises(PlanInputError) as refused:
        plan(host("dual-spr-2xnuma-4xl40s"), "Kimi-K2-Thinking", "serve", cpu_format="AMXINT8")
    assert str(refused.value) == (
        "Kimi-K2-Thinking ships int4 experts, which only kt-kernel's RAWINT4 reads; --cpu-format AMXINT8 "
        "would need a BF16 checkpoint"
    )


def test_fine_tuning_an_int4_checkpoint_is_refused_with_the_reason():
    result = plan(host("dual-spr-2xnuma-4xl40s"), "Kimi-K2-Thinking", "sft")
    assert not result["feasible"]
    assert any(
        "ships int4 (compressed-tensors) and ktinfra plans no int4 -> BF16" in p for p in result["problems"]
    )


def test_kimi_k2_5_keeps_its_int4_quantization_inside_text_config(tmp_path):
    """Kimi-K2.5's config.json wraps the Kimi-K2 text model (model_type kimi_k25, text_config) and puts the
    int4 quantization_config inside text_config; read as bf16 it was sized AMXINT8 at 1018 GB RAM."""
    text = copy.deepcopy(catalog.entry_config("Kimi-K2-Thinking"))
    wrapper = {
        "model_type": "kimi_k25",
        "architectures": ["KimiK25ForConditionalGeneration"],
        "text_config": text,
    }
    (tmp_path / "config.json").write_text(json.dumps(wrapper))
    arch = catalog.resolve(str(tmp_path))
    assert (arch.native_dtype, arch.quant_group_size) == ("int4", 32)
    assert sizing.download_bytes(arch) == pytest.approx(
        sizing.download_bytes(catalog.resolve("Kimi-K2-Thinking"))
    )
    result = plan(host("dual-spr-2xnuma-4xl40s"), str(tmp_path), "serve")
    assert result["serve"]["kt_method"] == "RAWINT4"
