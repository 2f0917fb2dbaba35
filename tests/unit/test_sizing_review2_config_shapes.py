"""config.json shapes that were sized wrong without a word: a Qwen/DeepSeek-family config missing
moe_intermediate_size, DeepSeek's moe_layer_freq without first_k_dense_replace, a head_dim derived as 0.

Each goes through `ktinfra plan`'s own path: a local directory with a config.json, read by catalog.resolve.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ktinfra import catalog


def _local(tmp_path, config: dict) -> str:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


@pytest.mark.parametrize(
    ("model", "keys"),
    [
        ("Qwen3-30B-A3B", "decoder_sparse_step, mlp_only_layers"),
        ("DeepSeek-V3", "n_routed_experts, first_k_dense_replace, n_shared_experts"),
        ("DeepSeek-V2-Lite", "n_routed_experts, first_k_dense_replace, n_shared_experts"),
    ],
)
def test_a_family_config_without_moe_intermediate_size_is_refused(tmp_path, model, keys):
    """intermediate_size is these families' dense width (6144 on Qwen3-30B-A3B, 8x an expert's 768):
    sized as the experts' width the model came out at 233B instead of 30.5B."""
    config = catalog.entry_config(model)
    del config["moe_intermediate_size"]
    with pytest.raises(catalog.ModelConfigError) as err:
        catalog.resolve(_local(tmp_path, config))
    assert str(err.value) == (
        f"{tmp_path}: config.json lacks moe_intermediate_size (the routed experts' width); its {keys} make "
        "intermediate_size the dense MLP's"
    )


def test_mixtral_style_configs_still_size_experts_with_intermediate_size(tmp_path):
    config = {
        "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8,
        "num_experts_per_tok": 2, "vocab_size": 32000, "torch_dtype": "bfloat16",
    }  # fmt: skip
    arch = catalog.resolve(_local(tmp_path, config))
    assert arch.moe_intermediate_size == 14336
    assert round(arch.total_params / 1e9, 1) == 46.7  # Mixtral-8x7B's card: 46.7B


def test_moe_layer_freq_without_first_k_dense_replace_is_read(tmp_path):
    """DeepseekV2Config's first_k_dense_replace defaults to 0; moe_layer_freq 2 leaves experts in every
    other layer, as the modeling code places them (it was ignored: all 61 layers counted)."""
    config = catalog.entry_config("DeepSeek-V3")
    del config["first_k_dense_replace"]
    config["moe_layer_freq"] = 2
    arch = catalog.resolve(_local(tmp_path, config))
    assert arch.num_moe_layers == 31  # layers 0, 2, ..., 60
    assert arch.num_dense_layers == 30


def test_a_head_dim_derived_as_zero_is_refused(tmp_path):
    """Without head_dim, hidden_size // num_attention_heads; below one it made the KV cache and the
    attention weights 0 bytes."""
    config = catalog.entry_config("Qwen3-30B-A3B")
    del config["head_dim"]
    config.update(num_attention_heads=4096, num_key_value_heads=4)
    with pytest.raises(catalog.ModelConfigError, match="lacks head_dim and its num_attention_heads 4096 "):
        catalog.resolve(_local(tmp_path, config))


def test_the_cli_refuses_a_config_without_moe_intermediate_size_with_exit_1_and_no_traceback(tmp_path):
    config = catalog.entry_config("Qwen3-30B-A3B")
    del config["moe_intermediate_size"]
    facts = Path(__file__).parents[1] / "fixtures" / "facts" / "h100-amx.json"
    args = ["plan", "--model", _local(tmp_path, config), "--facts", str(facts), "--json"]
    proc = subprocess.run(
        [sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "lacks moe_intermediate_size" in proc.stdout + proc.stderr
