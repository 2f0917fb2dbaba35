"""Published config.json files of MoE models outside the catalog: sized to their model cards' totals."""

import json

import pytest
import yaml
from model_configs import (
    DEEPSEEK_V32,
    ERNIE_4_5_21B_A3B,
    GLM_4_5_AIR,
    LLAMA4_MAVERICK,
    LLAMA4_SCOUT,
    MINIMAX_M2,
    QWEN2_57B_A14B,
    QWEN3_5_35B_A3B,
    QWEN3_NEXT_80B_A3B,
    QWEN3_VL_30B_A3B,
)
from test_plan import facts

from ktinfra import catalog, sizing
from ktinfra.planner import plan
from ktinfra.render.train import render_train


def _resolve(tmp_path, config: dict) -> catalog.Architecture:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return catalog.resolve(str(tmp_path))


def _resolve_in(tmp_path, name: str, config: dict) -> catalog.Architecture:
    """_resolve in a directory of its own, for tests that compare two configs."""
    (tmp_path / name).mkdir()
    return _resolve(tmp_path / name, config)


def _serve(model: str, host: str = "h100-amx") -> dict:
    return plan(facts(host), model, "serve")


# (config, published total, published active); Llama-4's totals include its ~1B vision encoder
PUBLISHED = {
    "GLM-4.5-Air": (GLM_4_5_AIR, 106e9, 12e9),
    "Qwen2-57B-A14B": (QWEN2_57B_A14B, 57.4e9, 14.2e9),
    "MiniMax-M2": (MINIMAX_M2, 230e9, 10e9),
    "Llama-4-Scout": (LLAMA4_SCOUT, 109e9, 17e9),
    "Llama-4-Maverick": (LLAMA4_MAVERICK, 400e9, 17e9),
    "ERNIE-4.5-21B-A3B": (ERNIE_4_5_21B_A3B, 21.8e9, 3.4e9),  # 3B active + 0.26B tied embeddings
    "Qwen3-Next-80B-A3B": (QWEN3_NEXT_80B_A3B, 80e9, 3.8e9),  # 3B active + 0.6B embeddings and LM head
    "DeepSeek-V3.2": (DEEPSEEK_V32, 671e9, 37e9),  # the card's 685B counts the 14B MTP layer (test below)
}


@pytest.mark.parametrize("name", PUBLISHED)
def test_parameter_counts_match_the_model_cards(tmp_path, name):
    config, total, active = PUBLISHED[name]
    arch = _resolve(tmp_path, config)
    assert arch.total_params == pytest.approx(total, rel=0.03)
    assert arch.active_params == pytest.approx(active, rel=0.12)


def test_llama4_maverick_interleaves_dense_and_moe_layers(tmp_path):
    arch = _resolve(tmp_path, LLAMA4_MAVERICK)
    assert (arch.num_moe_layers, arch.num_dense_layers) == (24, 24)
    assert arch.dense_intermediate_size == 16384  # intermediate_size_mlp, not the experts' 8192
    assert arch.shared_intermediate_size == 8192  # Llama4TextMoe's shared expert


def test_explicit_moe_layers_win_over_the_interleave_step(tmp_path):
    text = {**LLAMA4_MAVERICK["text_config"], "moe_layers": [1, 3, 5]}
    arch = _resolve(tmp_path, {**LLAMA4_MAVERICK, "text_config": text})
    assert arch.num_moe_layers == 3


def test_qwen_decoder_sparse_step_puts_experts_in_every_nth_layer(tmp_path):
    arch = _resolve(tmp_path, {**QWEN2_57B_A14B, "decoder_sparse_step": 2, "mlp_only_layers": [1]})
    assert arch.num_moe_layers == 13  # layers 3, 5, ..., 27 (layer 1 is listed as MLP-only)


def test_qwen3_next_caches_keys_and_values_only_in_its_full_attention_layers(tmp_path):
    arch = _resolve(tmp_path, QWEN3_NEXT_80B_A3B)
    assert (arch.num_kv_layers, arch.linear_attention.num_layers) == (12, 36)
    # 12 layers x 2 KV heads x 256 dims x (K and V) x bf16, not 48 layers' worth
    assert sizing.kv_bytes_per_token(arch) == 12 * 2 * 256 * 2 * 2
    # the Gated DeltaNet projections of the checkpoint: in_proj_qkvz [12288, 2048], in_proj_ba [64, 2048],
    # out_proj [2048, 4096], plus the depthwise conv1d over q, k and v (8192 channels x 4 taps)
    linear = 12288 * 2048 + 64 * 2048 + 2048 * 4096 + 8192 * 4
    # gated attention: q_proj [16 x 256 x 2, 2048] yields the queries and their output gate
    softmax = 2048 * 8192 + 2 * 2048 * 512 + 4096 * 2048
    assert arch.attention_params == 12 * softmax + 36 * linear
    ungated = _resolve(tmp_path, {**QWEN3_NEXT_80B_A3B, "attn_output_gate": False})
    assert arch.attention_params - ungated.attention_params == 12 * 2048 * 4096


def test_full_attention_interval_stands_in_for_layer_types(tmp_path):
    config = {k: v for k, v in QWEN3_NEXT_80B_A3B.items() if k != "layer_types"}
    assert _resolve(tmp_path, config).num_kv_layers == 12


def test_layer_types_of_the_wrong_length_are_refused(tmp_path):
    config = {**QWEN3_NEXT_80B_A3B, "layer_types": ["linear_attention", "full_attention"]}
    with pytest.raises(catalog.ModelConfigError, match="layer_types lists 2 layers, num_hidden_layers is 48"):
        _resolve(tmp_path, config)


def test_ernie_names_its_experts_and_moe_layers_with_its_own_keys(tmp_path):
    arch = _resolve(tmp_path, ERNIE_4_5_21B_A3B)
    assert (arch.num_experts, arch.experts_per_token) == (64, 6)  # moe_num_experts, moe_k
    assert (arch.num_dense_layers, arch.num_moe_layers) == (1, 27)  # moe_layer_start_index 1
    assert arch.shared_intermediate_size == 2 * 1536  # moe_num_shared_experts x moe_intermediate_size
    ends_early = _resolve(tmp_path, {**ERNIE_4_5_21B_A3B, "moe_layer_end_index": 20, "moe_layer_interval": 2})
    assert ends_early.num_moe_layers == 10  # layers 1, 3, ..., 19


def test_a_multimodal_checkpoint_warns_that_its_encoder_is_not_sized(tmp_path):
    arch = _resolve(tmp_path, LLAMA4_SCOUT)
    assert arch.encoders == ("vision_config",)
    message = "config.json has vision_config: the sizing counts the language model only (107.8B parameters)"
    assert catalog.unsized_encoders(arch).startswith(message)
    assert any(w.startswith(message) for w in _serve(str(tmp_path))["warnings"])
    assert catalog.unsized_encoders(_resolve(tmp_path, QWEN3_NEXT_80B_A3B)) is None


@pytest.mark.parametrize(
    "config, card",
    [(QWEN3_5_35B_A3B, 35e9), (QWEN3_VL_30B_A3B, 31.1e9)],
    ids=["Qwen3.5-35B-A3B", "Qwen3-VL-30B-A3B"],
)
def test_a_qwen_vision_tower_is_sized_and_brings_the_total_to_the_card(tmp_path, config, card):
    """The cards' totals count the vision encoder; molecule/envs checks the tower against transformers."""
    arch = _resolve(tmp_path, config)
    assert arch.encoders == () and catalog.unsized_encoders(arch) is None
    assert 0.4e9 < arch.encoder_params < 0.6e9
    assert arch.total_params + arch.encoder_params == pytest.approx(card, rel=0.005)


def test_the_vision_tower_is_on_the_gpu_and_in_the_download_in_bf16(tmp_path):
    with_tower = _resolve_in(tmp_path, "vl", QWEN3_VL_30B_A3B)
    text_only = catalog.resolve("Qwen3-30B-A3B")  # the same language model
    assert with_tower.total_params == text_only.total_params
    tower = with_tower.encoder_params * 2
    for fmt in ("AMXINT8", "BF16"):
        a, b = sizing.serve(with_tower, fmt).breakdown, sizing.serve(text_only, fmt).breakdown
        assert a["gpu_weights"] - b["gpu_weights"] == tower and a["cpu_experts"] == b["cpu_experts"]
    assert sizing.download_bytes(with_tower) - sizing.download_bytes(text_only) == tower
    assert sizing.sft(with_tower).vram_bytes - sizing.sft(text_only).vram_bytes == tower
    fp8 = {
        **QWEN3_VL_30B_A3B,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    }
    fp8_arch = _resolve_in(tmp_path, "fp8", fp8)
    assert fp8_arch.native_dtype == "fp8"
    bf16 = fp8_arch.embedding_params * 2 + fp8_arch.router_params  # embedding, head and routers unquantized
    language = sizing.checkpoint_bytes(fp8_arch, fp8_arch.non_expert_params, "fp8", embeddings=bf16)
    assert sizing.gpu_non_expert_bytes(fp8_arch, "fp8") == language + tower  # the tower is never quantized


def test_the_vision_tower_takes_fewer_gpu_experts_on_a_24_gb_card(tmp_path):
    tower = _resolve_in(tmp_path, "vl", QWEN3_VL_30B_A3B).encoder_params * 2
    with_tower = _serve(str(tmp_path / "vl"), "seed002-autodl-6430-4090")
    text_only = _serve("Qwen3-30B-A3B", "seed002-autodl-6430-4090")
    assert with_tower["feasible"] and text_only["feasible"]
    weights = [r["requirements_breakdown"]["gpu_weights"] for r in (with_tower, text_only)]
    assert weights[0] - weights[1] == tower
    assert with_tower["serve"]["kt_num_gpu_experts"] < text_only["serve"]["kt_num_gpu_experts"]
    assert (
        "4.2 GB non-expert weights (1.1 GB of them the vision encoder)"
        in with_tower["reasons"]["kt_num_gpu_experts"]
    )
    assert "vision encoder" not in text_only["reasons"]["kt_num_gpu_experts"]


@pytest.mark.parametrize(
    "config, architecture, template",
    [(QWEN3_5_35B_A3B, "qwen3_5_moe", "qwen3_5"), (QWEN3_VL_30B_A3B, "qwen3_vl_moe", "qwen3_vl")],
    ids=["Qwen3.5-35B-A3B", "Qwen3-VL-30B-A3B"],
)
def test_a_multimodal_checkpoint_is_planned_as_its_own_model_type_and_gets_its_template(
    tmp_path, config, architecture, template
):
    """config.json's top-level model_type, not its text_config's (qwen3_5_moe_text), names the architecture:
    LLaMA-Factory's chat template for the checkpoint is looked up by it."""
    _resolve(tmp_path, config)
    result = plan(facts("seed002-autodl-6430-4090"), str(tmp_path), "sft")
    assert result["feasible"], result["problems"]
    assert result["model"]["architecture"] == architecture
    rendered = render_train(
        result, name="mm", model_path="/m", dataset="identity", dataset_dir="/d", output_dir="/o"
    )
    assert yaml.safe_load(rendered.files["mm.yaml"][0])["template"] == template


def test_only_qwen3_vl_towers_have_deepstack_mergers(tmp_path):
    def deepstack(config: dict, indexes: list[int]) -> int:
        vision = {**config["vision_config"], "deepstack_visual_indexes": indexes}
        return catalog.from_config({**config, "vision_config": vision}, name="m").encoder_params

    assert deepstack(QWEN3_5_35B_A3B, [8, 16]) == deepstack(QWEN3_5_35B_A3B, [])  # its tower has none
    assert (
        deepstack(QWEN3_VL_30B_A3B, [8, 16, 24])
        > deepstack(QWEN3_VL_30B_A3B, [8])
        > deepstack(QWEN3_VL_30B_A3B, [])
    )


@pytest.mark.parametrize(
    "vision, message",
    [
        ({"depth": 0}, "vision_config: config.json depth must be a positive integer, got 0"),
        ({"hidden_size": "1152"}, 'hidden_size must be a positive integer, got "1152"'),
        ({"deepstack_visual_indexes": 3}, "vision_config deepstack_visual_indexes must be a list, got 3"),
    ],
)
def test_a_bad_vision_config_value_is_refused_naming_it(tmp_path, vision, message):
    bad = {**QWEN3_VL_30B_A3B, "vision_config": {**QWEN3_VL_30B_A3B["vision_config"], **vision}}
    with pytest.raises(catalog.ModelConfigError, match=message):
        _resolve(tmp_path, bad)


def test_qwen3_next_state_slot_is_sglangs_mamba_cache_per_req(tmp_path):
    arch = _resolve(tmp_path, QWEN3_NEXT_80B_A3B)
    # sglang-kt 0.7.2 Mamba2StateShape on each of the 36 Gated DeltaNet layers: the convolution window over
    # 4096 value + 2 x 16 x 128 key channels, kernel 4 - 1 taps, in bf16; the recurrent state, 32 value heads
    # x 128 x 128, in fp32 (molecule/envs checks this against sglang-kt's own Qwen3NextConfig)
    assert sizing.state_bytes_per_slot(arch) == 36 * (8192 * 3 * 2 + 32 * 128 * 128 * 4)
    assert sizing.state_bytes_per_slot(catalog.resolve("Qwen3-30B-A3B")) == 0


def test_serving_a_hybrid_model_keeps_three_state_slots_per_running_request(tmp_path):
    arch = _resolve(tmp_path, QWEN3_NEXT_80B_A3B)
    result = _serve(str(tmp_path))
    serve, breakdown = result["serve"], result["requirements_breakdown"]
    slot = sizing.state_bytes_per_slot(arch)
    assert serve["max_running_requests"] == 32
    assert serve["max_mamba_cache_size"] == 96  # SGLang admits max_mamba_cache_size // 3 requests
    assert breakdown["recurrent_state_min"] == 3 * slot  # the one request the server must hold
    assert result["requirements"]["vram_bytes"] == (
        breakdown["gpu_weights"] + breakdown["kv_cache_min"] + breakdown["recurrent_state_min"]
    )
    # the GPU experts fill what the weights and 32 x (4096 KV tokens + 3 state slots) leave, no more
    static = serve["mem_fraction_static"] * result["host"]["gpus"][0]["memory_mib"] * 2**20
    budget = 32 * (4096 * sizing.kv_bytes_per_token(arch) + 3 * slot)
    expert_layer = sizing.gpu_expert_bytes(arch, "bf16") * arch.num_moe_layers
    experts = serve["kt_num_gpu_experts"]
    assert breakdown["gpu_weights"] + budget + experts * expert_layer <= static
    assert breakdown["gpu_weights"] + budget + (experts + 1) * expert_layer > static
    assert experts == 209  # 234 when the 7.4 GB of state slots were left out
    assert "3 linear-attention state slots (231.8 MB)" in result["reasons"]["max_running_requests"]
    assert result["reasons"]["max_mamba_cache_size"].startswith("96: 3 slots of 77.3 MB")


def test_models_without_linear_attention_leave_the_state_pool_alone():
    result = _serve("Qwen3-30B-A3B")
    assert result["serve"]["max_mamba_cache_size"] is None
    assert "recurrent_state_min" not in result["requirements_breakdown"]
    assert "max_mamba_cache_size" not in result["reasons"]


def test_deepseek_v32_counts_its_lightning_indexer(tmp_path):
    arch = _resolve(tmp_path, DEEPSEEK_V32)
    v3 = catalog.resolve("DeepSeek-V3")
    # per layer: wq_b [64 x 128, 1536] from the compressed query, wk [128, 7168], weights_proj [64, 7168]
    indexer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64
    assert arch.total_params - v3.total_params == 61 * indexer
    assert arch.total_params + arch.mtp_params == pytest.approx(685e9, rel=0.002)  # the model card's 685B


def test_deepseek_v32_caches_its_indexer_keys_beside_the_latent(tmp_path):
    arch = _resolve(tmp_path, DEEPSEEK_V32)
    # SGLang's NSATokenToKVPool: the bf16 latent (512 + 64) and 128 fp8 index keys + one fp32 scale, per layer
    assert sizing.kv_bytes_per_token(arch) == 61 * ((512 + 64) * 2 + 128 + 4)
    assert sizing.kv_bytes_per_token(catalog.resolve("DeepSeek-V3")) == 61 * (512 + 64) * 2
    without_index_topk = _resolve(tmp_path, {k: v for k, v in DEEPSEEK_V32.items() if k != "index_topk"})
    assert without_index_topk.indexer is None  # SGLang's is_deepseek_nsa needs index_topk too


def test_qwen3_5_reads_its_text_config_as_a_hybrid_model(tmp_path):
    arch = _resolve(tmp_path, QWEN3_5_35B_A3B)
    assert arch.total_params == pytest.approx(35e9, rel=0.03)  # the card's 35B counts the vision encoder too
    assert (arch.num_kv_layers, arch.linear_attention.num_layers) == (10, 30)
    assert arch.attention_output_gate and arch.encoders == ()  # its vision tower is sized (below)
    # 30 Gated DeltaNet layers of the same shape as Qwen3-Next's (sglang-kt Mamba2StateShape)
    assert sizing.state_bytes_per_slot(arch) == 30 * (8192 * 3 * 2 + 32 * 128 * 128 * 4)
    # its MTP layer (mtp_num_hidden_layers) is in the download, sharing the embedding and head
    mtp = arch.attention_params_per_layer + 256 * arch.expert_params + 3 * 2048 * 512 + 2048 * 256
    assert (arch.num_mtp_layers, arch.mtp_own_embeddings) == (1, False)
    assert arch.mtp_params == mtp + 2 * 2048 * 2048
    assert catalog.resolve("DeepSeek-V3").mtp_own_embeddings  # num_nextn_predict_layers: its own copies


def test_qwen3_5_on_the_seed002_box_keeps_state_slots_for_its_16_requests(tmp_path):
    _resolve(tmp_path, QWEN3_5_35B_A3B)
    result = _serve(str(tmp_path), "seed002-autodl-6430-4090")
    assert result["feasible"], result["problems"]
    serve = result["serve"]
    assert (serve["max_running_requests"], serve["max_mamba_cache_size"]) == (16, 48)
    assert serve["kt_method"] == "AMXINT8" and 0 < serve["kt_num_gpu_experts"] < 256
