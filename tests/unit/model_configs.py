"""config.json contents of models outside the catalog, for local-directory tests."""

# Mixtral-8x7B's config.json keys the sizing reads (mistralai/Mixtral-8x7B-v0.1)
MIXTRAL_8X7B = {
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_local_experts": 8, "num_experts_per_tok": 2, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 32000, "torch_dtype": "bfloat16",
}  # fmt: skip

# zai-org/GLM-4.5-Air: the Glm4MoeConfig ms-swift prints when loading ZhipuAI/GLM-4.5-Air (a public Megatron
# conversion log); published as 106B total / 12B active (transformers docs/source/en/model_doc/glm4_moe.md)
GLM_4_5_AIR = {
    "architectures": ["Glm4MoeForCausalLM"], "attention_bias": True, "first_k_dense_replace": 1,
    "head_dim": 128, "hidden_size": 4096, "intermediate_size": 10944, "max_position_embeddings": 131072,
    "model_type": "glm4_moe", "moe_intermediate_size": 1408, "n_group": 1, "n_routed_experts": 128,
    "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 96, "num_experts_per_tok": 8, "num_hidden_layers": 46,
    "num_key_value_heads": 8, "num_nextn_predict_layers": 1, "partial_rotary_factor": 0.5,
    "routed_scaling_factor": 1.0, "tie_word_embeddings": False, "topk_group": 1, "torch_dtype": "bfloat16",
    "use_qk_norm": False, "vocab_size": 151552,
}  # fmt: skip

# Qwen3-Next-80B-A3B (80B total / 3B active): the qwen3_next config.json of Qwen3-Coder-Next as a public test
# transcribes it (same architecture; it notes only rope_theta differs from the 80B's), without its
# quantization_config. layer_types: every 4th layer full attention, the rest Gated DeltaNet.
QWEN3_NEXT_80B_A3B = {
    "architectures": ["Qwen3NextForCausalLM"], "attention_bias": False, "decoder_sparse_step": 1,
    "dtype": "bfloat16", "full_attention_interval": 4, "head_dim": 256, "hidden_size": 2048,
    "intermediate_size": 5120,
    "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(48)],
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128, "max_position_embeddings": 262144,
    "mlp_only_layers": [], "model_type": "qwen3_next", "moe_intermediate_size": 512, "norm_topk_prob": True,
    "num_attention_heads": 16, "num_experts": 512, "num_experts_per_tok": 10, "num_hidden_layers": 48,
    "num_key_value_heads": 2, "partial_rotary_factor": 0.25, "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": False, "vocab_size": 151936,
}  # fmt: skip

_LLAMA4_TEXT = {
    "attention_bias": False, "attention_chunk_size": 8192, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
    "model_type": "llama4_text", "num_attention_heads": 40, "num_experts_per_tok": 1,
    "num_hidden_layers": 48, "num_key_value_heads": 8,
    "torch_dtype": "bfloat16", "vocab_size": 202048,
}  # fmt: skip
# meta-llama/Llama-4-Scout-17B-16E (109B total / 17B active): the Llama4Config a public notes file prints
# (its vision_config cut to two keys); every layer MoE.
LLAMA4_SCOUT = {
    "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "tie_word_embeddings": False,
    "vision_config": {"attention_dropout": 0.0, "hidden_act": "gelu"},
    "text_config": {
        **_LLAMA4_TEXT, "interleave_moe_layer_step": 1, "max_position_embeddings": 262144,
        "moe_layers": list(range(48)), "num_local_experts": 16, "use_qk_norm": True,
    },
}  # fmt: skip
# meta-llama/Llama-4-Maverick-17B-128E (400B total / 17B active): TensorRT-LLM's two-layer test copy of its
# config.json with num_hidden_layers back at the 48 its comment says it was reduced from (its
# vision_config cut to two keys); every 2nd layer MoE.
LLAMA4_MAVERICK = {
    "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "torch_dtype": "bfloat16",
    "vision_config": {"attention_dropout": 0.0, "hidden_act": "gelu"},
    "text_config": {
        **_LLAMA4_TEXT, "interleave_moe_layer_step": 2, "max_position_embeddings": 1048576,
        "num_local_experts": 128, "use_qk_norm": False,
    },
}  # fmt: skip

# MiniMaxAI/MiniMax-M2 (230B total / 10B active): the config a vLLM test builds for it, FP8 block quantization
MINIMAX_M2 = {
    "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "hidden_size": 3072,
    "intermediate_size": 1536, "num_hidden_layers": 62, "num_attention_heads": 48, "num_key_value_heads": 8,
    "head_dim": 128, "rotary_dim": 64, "num_local_experts": 256, "num_experts_per_tok": 8,
    "scoring_func": "sigmoid", "use_routing_bias": True, "use_qk_norm": True,
    "max_position_embeddings": 204800, "vocab_size": 200064, "tie_word_embeddings": False,
    "num_mtp_modules": 3, "mtp_transformer_layers": 1,
    "use_mtp": True,
    "quantization_config": {
        "activation_scheme": "dynamic", "fmt": "float8_e4m3fn", "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
}  # fmt: skip

# Qwen/Qwen2-57B-A14B (57B total / 14B active): TensorRT-LLM's QWEN2_57B_A14B_CONFIG test copy
QWEN2_57B_A14B = {
    "architectures": ["Qwen2MoeForCausalLM"], "decoder_sparse_step": 1, "hidden_size": 3584,
    "intermediate_size": 18944, "max_position_embeddings": 131072, "model_type": "qwen2_moe",
    "moe_intermediate_size": 2560, "num_attention_heads": 28, "num_experts": 64, "num_experts_per_tok": 8,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "shared_expert_intermediate_size": 20480,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 151936,
}  # fmt: skip

# baidu/ERNIE-4.5-21B-A3B-PT (21B total / 3B active): the config.json a public Swift test embeds
ERNIE_4_5_21B_A3B = {
    "model_type": "ernie4_5_moe", "hidden_size": 2560, "intermediate_size": 12288,
    "max_position_embeddings": 131072, "num_attention_heads": 20, "num_key_value_heads": 4, "head_dim": None,
    "num_hidden_layers": 28, "vocab_size": 103424, "use_bias": False, "tie_word_embeddings": True,
    "moe_num_experts": 64, "moe_layer_start_index": 1, "moe_intermediate_size": 1536, "moe_k": 6,
    "moe_layer_interval": 1, "moe_num_shared_experts": 2, "moe_layer_end_index": None,
}  # fmt: skip

# deepseek-ai/DeepSeek-V3.2 (685B with its MTP layer, DSA sparse attention): its config.json as a public
# architecture write-up (DeepSeek-V3.2 模型架构详解) quotes it in full, rope_scaling cut to its type.
DEEPSEEK_V32 = {
    "architectures": ["DeepseekV32ForCausalLM"], "attention_bias": False, "first_k_dense_replace": 3,
    "hidden_act": "silu", "hidden_size": 7168, "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048,
    "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
    "model_type": "deepseek_v32", "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8,
    "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
    "rope_scaling": {"type": "yarn"}, "rope_theta": 10000, "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid", "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 129280,
}  # fmt: skip

# Qwen/Qwen3.5-35B-A3B (35B with its vision encoder / 3B active; hybrid Gated DeltaNet + gated attention, one
# MTP layer): the text_config values a public inventory of its HF snapshot ec2d4ece (2026-04-21) lists, with
# the attention shape (16 heads, 2 KV heads, head_dim 256) of a public qwen3_5_moe test config that mirrors
# it; vision_config as public dumps of the snapshot's config.json print it.
QWEN3_5_35B_A3B = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
    "tie_word_embeddings": False,
    "vision_config": {
        "deepstack_visual_indexes": [], "depth": 27, "dtype": "bfloat16", "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 1152, "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4304,
        "model_type": "qwen3_5_moe_vision", "num_heads": 16, "num_position_embeddings": 2304,
        "out_hidden_size": 2048, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
    "text_config": {
        "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
        "layer_types": ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(40)],
        "full_attention_interval": 4, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
        "attn_output_gate": True, "partial_rotary_factor": 0.25, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
        "linear_conv_kernel_dim": 4, "mamba_ssm_dtype": "float32", "num_experts": 256,
        "num_experts_per_tok": 8, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
        "router_aux_loss_coef": 0.001, "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False,
        "vocab_size": 248320, "rope_theta": 10000000, "eos_token_id": 248044, "tie_word_embeddings": False,
    },
}  # fmt: skip

# Qwen/Qwen3-VL-30B-A3B-Instruct (31B with its vision encoder / 3B active): its config.json as a public parser
# test transcribes it from the fetched file (commit 1fc78ad); the language model is Qwen3-30B-A3B's, the
# vision tower adds three deepstack mergers.
QWEN3_VL_30B_A3B = {
    "architectures": ["Qwen3VLMoeForConditionalGeneration"], "image_token_id": 151655,
    "model_type": "qwen3_vl_moe", "tie_word_embeddings": False, "video_token_id": 151656,
    "vision_end_token_id": 151653, "vision_start_token_id": 151652,
    "text_config": {
        "attention_bias": False, "decoder_sparse_step": 1, "head_dim": 128, "hidden_size": 2048,
        "intermediate_size": 6144, "max_position_embeddings": 262144, "mlp_only_layers": [],
        "model_type": "qwen3_vl_moe_text", "moe_intermediate_size": 768, "norm_topk_prob": True,
        "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
        "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
        "rope_theta": 5000000, "vocab_size": 151936,
    },
    "vision_config": {
        "deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 1152, "in_channels": 3, "intermediate_size": 4304, "model_type": "qwen3_vl_moe",
        "num_heads": 16, "num_position_embeddings": 2304, "out_hidden_size": 2048, "patch_size": 16,
        "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
}  # fmt: skip
