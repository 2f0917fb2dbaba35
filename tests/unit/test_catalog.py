import copy
import json
import re

import model_configs
import pytest
from model_configs import MIXTRAL_8X7B

from ktinfra import catalog

# Published totals (model cards): the parameter formulas must reproduce them from config.json numbers.
PUBLISHED_TOTAL = {
    "DeepSeek-V2-Lite": 15.7e9,
    "Qwen3-30B-A3B": 30.5e9,
    "Qwen3-235B-A22B": 235e9,
    "DeepSeek-V3": 671e9,
    "Kimi-K2": 1.04e12,
}
PUBLISHED_ACTIVE = {"Qwen3-30B-A3B": 3.3e9, "Qwen3-235B-A22B": 22e9, "DeepSeek-V3": 37e9, "Kimi-K2": 32e9}


@pytest.mark.parametrize("name,total", PUBLISHED_TOTAL.items())
def test_total_parameters_match_the_model_cards(name, total):
    assert catalog.resolve(name).total_params == pytest.approx(total, rel=0.03)


@pytest.mark.parametrize("name,active", PUBLISHED_ACTIVE.items())
def test_active_parameters_match_the_model_cards(name, active):
    assert catalog.resolve(name).active_params == pytest.approx(active, rel=0.08)


def test_deepseek_v3_checkpoint_carries_the_mtp_layer():
    # 671B main model + the MTP module = the 685B the checkpoint holds
    arch = catalog.resolve("DeepSeek-V3")
    assert arch.total_params + arch.mtp_params == pytest.approx(685e9, rel=0.01)


@pytest.mark.parametrize(
    "spelling,name",
    [
        ("qwen3-30b-a3b", "Qwen3-30B-A3B"),
        ("Qwen/Qwen3-30B-A3B", "Qwen3-30B-A3B"),
        ("DEEPSEEK-V3", "DeepSeek-V3"),
        ("deepseek-ai/DeepSeek-R1", "DeepSeek-R1"),  # V3's architecture, its own checkpoint
        ("DeepSeek-V3-671B", "DeepSeek-V3"),  # a nickname of V3's own checkpoint
        ("kimi-k2", "Kimi-K2"),
        ("moonshotai/Kimi-K2-Instruct", "Kimi-K2"),
        ("DeepSeek-V2-Lite", "DeepSeek-V2-Lite"),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507", "Qwen3-235B-A22B-Instruct-2507"),
    ],
)
def test_short_names_aliases_and_repo_ids_resolve(spelling, name):
    assert catalog.resolve(spelling).name == name


@pytest.mark.parametrize(
    ("asked", "name", "repo", "entry"),
    [
        ("deepseek-ai/DeepSeek-R1", "DeepSeek-R1", "deepseek-ai/DeepSeek-R1", "DeepSeek-V3"),
        ("deepseek-r1-0528", "DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1-0528", "DeepSeek-V3"),
        ("Kimi-K2-Base", "Kimi-K2-Base", "moonshotai/Kimi-K2-Base", "Kimi-K2"),
        ("Kimi-K2-Instruct", "Kimi-K2", "moonshotai/Kimi-K2-Instruct", "Kimi-K2"),
        ("DeepSeek-V2-Lite-14B", "DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-V2-Lite", "DeepSeek-V2-Lite"),
    ],
)
def test_an_alias_naming_another_checkpoint_keeps_its_repo(asked, name, repo, entry):
    """Before: `plan -m deepseek-ai/DeepSeek-R1` planned, downloaded and served deepseek-ai/DeepSeek-V3."""
    arch, base = catalog.resolve(asked), catalog.resolve(entry)
    assert (arch.name, arch.hf_repo) == (name, repo)
    assert (arch.total_params, arch.num_experts, arch.legacy_sft_rules) == (
        base.total_params,
        base.num_experts,
        base.legacy_sft_rules,
    )
    assert catalog.entry_config(asked) == catalog.entry_config(entry)


def test_2507_refresh_inherits_the_architecture_with_its_longer_context():
    base, refresh = catalog.resolve("Qwen3-30B-A3B"), catalog.resolve("Qwen3-30B-A3B-Instruct-2507")
    assert refresh.total_params == base.total_params
    assert (base.max_position_embeddings, refresh.max_position_embeddings) == (40960, 262144)
    assert refresh.template == "qwen3_nothink" and refresh.legacy_sft_rules == base.legacy_sft_rules


def test_entry_config_merges_the_parent_and_is_a_copy(tmp_path):
    config = catalog.entry_config("Qwen/Qwen3-30B-A3B-Instruct-2507")
    assert config["num_experts"] == 128 and config["max_position_embeddings"] == 262144  # parent + override
    config["num_experts"] = 1
    assert catalog.entry_config("Qwen3-30B-A3B-Instruct-2507")["num_experts"] == 128
    model_dir = tmp_path / "my-qwen"
    model_dir.mkdir()
    _write_config(model_dir, catalog.entry_config("Qwen3-30B-A3B"))
    with pytest.raises(catalog.UnknownModelError, match="not a catalog model"):
        catalog.entry_config(str(model_dir))


def test_native_dtype_comes_from_the_quantization_config():
    assert catalog.resolve("DeepSeek-V3").native_dtype == "fp8"
    assert catalog.resolve("Kimi-K2").native_dtype == "fp8"
    assert catalog.resolve("Qwen3-235B-A22B").native_dtype == "bf16"


def test_mla_caches_the_latent_and_gqa_caches_heads():
    assert catalog.resolve("DeepSeek-V3").kv_elements_per_token == 61 * (512 + 64)
    assert catalog.resolve("Qwen3-30B-A3B").kv_elements_per_token == 48 * 2 * 4 * 128


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(catalog.UnknownModelError, match="Qwen3-30B-A3B"):
        catalog.resolve("Llama-3-70B")


def _write_config(tmp_path, config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_local_directory_is_sized_from_its_config(tmp_path):
    # A local copy of Qwen3-30B-A3B (the catalog's numbers written as a config.json)
    model_dir = tmp_path / "my-qwen"
    model_dir.mkdir()
    _write_config(model_dir, catalog.entry_config("Qwen3-30B-A3B"))
    arch = catalog.resolve(str(model_dir))
    assert arch.name == "my-qwen" and arch.path == str(model_dir.resolve())
    assert arch.total_params == catalog.resolve("Qwen3-30B-A3B").total_params
    assert arch.legacy_sft_rules == {1: "Qwen3Moe-sft-amx.yaml"}  # found by matching the architecture


def test_local_directory_given_as_dot_is_named_after_the_folder(tmp_path, monkeypatch):
    model_dir = tmp_path / "my-qwen"
    model_dir.mkdir()
    _write_config(model_dir, catalog.entry_config("Qwen3-30B-A3B"))
    monkeypatch.chdir(model_dir)
    assert catalog.resolve(".").name == "my-qwen"
    monkeypatch.chdir(model_dir / "..")
    assert catalog.resolve("my-qwen/../my-qwen").name == "my-qwen"


def test_local_mixtral_style_config_uses_intermediate_size_for_experts(tmp_path):
    arch = catalog.resolve(str(_write_config(tmp_path, MIXTRAL_8X7B)))
    assert arch.total_params == pytest.approx(46.7e9, rel=0.02)  # Mixtral-8x7B's published total
    assert arch.legacy_sft_rules == {}


def test_dense_model_directory_is_refused(tmp_path):
    config = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 32000}
    with pytest.raises(catalog.ModelConfigError, match="config.json lacks"):
        catalog.resolve(str(_write_config(tmp_path, config)))


@pytest.mark.parametrize(
    "change,message",
    [
        ({"num_attention_heads": 0}, "config.json num_attention_heads must be a positive integer, got 0"),
        ({"num_hidden_layers": 0}, "config.json num_hidden_layers must be an integer from 1 to 10000, got 0"),
        ({"num_hidden_layers": -4}, "num_hidden_layers must be an integer from 1 to 10000, got -4"),
        ({"hidden_size": {}}, "config.json hidden_size must be a positive integer, got {}"),
        ({"num_experts": "many"}, 'config.json num_experts must be a non-negative integer, got "many"'),
        ({"num_experts": 8, "num_experts_per_tok": 16}, "num_experts_per_tok must be an integer from 1 to 8"),
        ({"num_experts_per_tok": 0}, "num_experts_per_tok must be an integer from 1 to 128, got 0"),
        ({"first_k_dense_replace": 48}, "first_k_dense_replace must be an integer from 0 to 47, got 48"),
        ({"mlp_only_layers": [3, 99]}, "mlp_only_layers must list some of the layer indices 0..47"),
        ({"num_experts": 0}, "not a mixture-of-experts model (config.json num_experts is 0)"),
    ],
)
def test_impossible_config_values_name_the_key_and_the_file(tmp_path, change, message):
    model_dir = tmp_path / "my-qwen"
    model_dir.mkdir()
    _write_config(model_dir, {**catalog.entry_config("Qwen3-30B-A3B"), **change})
    with pytest.raises(catalog.ModelConfigError, match=f"^{re.escape(str(model_dir.resolve()))}: .*"):
        catalog.resolve(str(model_dir))
    with pytest.raises(catalog.ModelConfigError, match=re.escape(message)):
        catalog.resolve(str(model_dir))


GPT_OSS_20B = {  # openai/gpt-oss-20b config.json, the keys the sizing reads
    "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 24,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
    "num_experts_per_tok": 4, "vocab_size": 201088, "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]},
}  # fmt: skip


def test_quantizations_the_sizing_cannot_count_are_refused_not_sized_as_bf16(tmp_path):
    with pytest.raises(catalog.ModelConfigError, match="quantization mxfp4 .* is not sized by ktinfra"):
        catalog.resolve(str(_write_config(tmp_path, GPT_OSS_20B)))
    int8 = {**catalog.entry_config("Qwen3-30B-A3B"), "torch_dtype": "int8"}
    with pytest.raises(catalog.ModelConfigError, match="config.json torch_dtype int8 is not sized"):
        catalog.resolve(str(_write_config(tmp_path, int8)))


def test_architectures_outside_the_catalog_are_flagged_unverified(tmp_path):
    assert all(catalog.unverified_architecture(arch) is None for arch in catalog.list_models())
    moe = {**GPT_OSS_20B, "quantization_config": None}
    warning = catalog.unverified_architecture(catalog.resolve(str(_write_config(tmp_path, moe))))
    assert warning.startswith("architecture gpt_oss is outside the catalog's (deepseek_v2, ")
    assert "support for it is unverified" in warning


def test_directory_without_config_and_bad_json_are_refused(tmp_path):
    with pytest.raises(catalog.UnknownModelError, match="no config.json"):
        catalog.resolve(str(tmp_path))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(catalog.ModelConfigError, match="not valid JSON"):
        catalog.resolve(str(tmp_path))


def _key_paths(node, prefix=()):
    for key, value in node.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from _key_paths(value, (*prefix, key))


@pytest.mark.parametrize(
    "base",
    ["Qwen3-30B-A3B", "DeepSeek-V3", "QWEN3_NEXT_80B_A3B", "QWEN3_VL_30B_A3B", "LLAMA4_SCOUT"]
    + ["DEEPSEEK_V32"],
)
def test_a_flooded_config_value_gives_a_short_one_line_error(tmp_path, base):
    """Any config.json value (nested ones too) replaced by 5000 characters, 2000 numbers or 1000 keys: the
    error names it in one short line. Before, a list torch_dtype or quant_method printed all of it (18 kB)."""
    config = getattr(model_configs, base, None) or catalog.entry_config(base)
    floods = ("x" * 5000, [10**6] * 2000, {f"k{i}": i for i in range(1000)})
    longest = (0, None)
    for path in list(_key_paths(config)):
        for flood in floods:
            changed = copy.deepcopy(config)
            node = changed
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = flood
            try:
                catalog.resolve(str(_write_config(tmp_path, changed)))
            except (catalog.ModelConfigError, catalog.UnknownModelError) as error:
                message = str(error)
                assert "\n" not in message, path
                longest = max(longest, (len(message), ".".join(path)))
    assert longest[0] <= 400, longest


def test_jamba_style_layer_placement_is_refused_not_sized_as_all_moe(tmp_path):
    """ai21labs/Jamba-v0.1: MoE in every 2nd layer from 1, attention in every 8th, Mamba between. Before, it
    was sized as 32 MoE attention layers: 92 B parameters for a 52 B model."""
    jamba = {
        "model_type": "jamba", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_experts": 16, "num_experts_per_tok": 2, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 65536, "expert_layer_period": 2, "expert_layer_offset": 1, "attn_layer_period": 8,
        "attn_layer_offset": 4, "torch_dtype": "bfloat16",
    }  # fmt: skip
    with pytest.raises(catalog.ModelConfigError, match="places its layers with expert_layer_period, "):
        catalog.resolve(str(_write_config(tmp_path, jamba)))


def test_ling_counts_its_shared_expert(tmp_path):
    """inclusionAI Ling (bailing_moe) names it num_shared_experts; before, its shared expert was left out."""
    config = {
        **MIXTRAL_8X7B,
        "model_type": "bailing_moe",
        "moe_intermediate_size": 512,
        "num_shared_experts": 1,
    }
    arch = catalog.resolve(str(_write_config(tmp_path, config)))
    assert arch.shared_intermediate_size == 512


def test_a_repo_id_outside_the_catalog_says_how_to_plan_it():
    """Before: "a local path must be a directory with config.json" for Qwen/Qwen3-30B-A3B-FP8."""
    with pytest.raises(catalog.UnknownModelError) as caught:
        catalog.resolve("Qwen/Qwen3-30B-A3B-FP8")
    assert "hf download Qwen/Qwen3-30B-A3B-FP8 --local-dir DIR`, and pass --model DIR" in str(caught.value)
    with pytest.raises(catalog.UnknownModelError, match="a local path must be a directory with config.json"):
        catalog.resolve("/nope/Qwen3")
