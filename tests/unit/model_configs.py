"""config.json contents of models outside the catalog, for local-directory tests."""

# Mixtral-8x7B's config.json keys the sizing reads (mistralai/Mixtral-8x7B-v0.1)
MIXTRAL_8X7B = {
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_local_experts": 8, "num_experts_per_tok": 2, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 32000, "torch_dtype": "bfloat16",
}  # fmt: skip
