"""Model catalog: MoE architecture numbers read from config.json (the counts are in ktinfra.architecture).

`resolve(name)` accepts a catalog short name (case-insensitive), a Hugging Face repo id, or a local model
directory holding a config.json.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import replace
from pathlib import Path

import yaml

from ktinfra.architecture import MLA, Architecture, LinearAttention, SparseIndexer, VisionEncoder
from ktinfra.shown import json_shown, name_shown

CATALOG_PATH = Path(__file__).parent / "data" / "models.yaml"


class UnknownModelError(ValueError):
    pass


class ModelConfigError(ValueError):
    pass


def _int_in(value, low: int, high: int | None) -> bool:
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    return low <= value and (high is None or value <= high)


# No released model comes near it (vocabularies ~2^18, contexts ~2^24); above it a number is damage, and
# products of such numbers would overflow the float arithmetic of the sizing.
MAX_CONFIG_INT = 2**31 - 1


def _int_key(config: dict, key: str, source: str, *, low: int = 1, high: int | None = None) -> int | None:
    """config[key] as an int in low..high (None when absent or null); ModelConfigError naming key and file."""
    value = config.get(key)
    if value is None:
        return None
    if _int_in(value, low, None) and high is None and value > MAX_CONFIG_INT:
        raise ModelConfigError(
            f"{source}: config.json {key} must be at most {MAX_CONFIG_INT} (no model comes near), "
            f"got {json_shown(value)}"
        )
    if not _int_in(value, low, high):
        if high is not None:
            want = f"an integer from {low} to {high}"
        else:
            want = {0: "a non-negative integer", 1: "a positive integer"}.get(low, f"an integer >= {low}")
        raise ModelConfigError(f"{source}: config.json {key} must be {want}, got {json_shown(value)}")
    return value


def _bool_key(config: dict, key: str, default: bool, source: str) -> bool:
    """config[key] as a JSON boolean (default when absent or null): "false" would read as true."""
    value = config.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ModelConfigError(f"{source}: config.json {key} must be true or false, got {json_shown(value)}")
    return value


def _need(config: dict, *keys: str, source: str, low: int = 1, high: int | None = None) -> int:
    for key in keys:
        if config.get(key) is not None:
            return _int_key(config, key, source, low=low, high=high)
    raise ModelConfigError(f"{source}: config.json lacks {' / '.join(keys)}")


MAX_LAYERS = 10_000  # the deepest released models have ~200; the layer rules build per-layer lists
SIZED_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}  # torch_dtype -> sizing dtype


def _int4_group_size(quant: dict) -> int | None:
    """The group size of a compressed-tensors pack-quantized checkpoint whose only quantized weights are
    symmetric int4 in groups, activations left alone (Kimi-K2-Thinking's routed experts); None otherwise."""
    groups = quant.get("config_groups")
    if quant.get("format") != "pack-quantized" or not isinstance(groups, dict) or len(groups) != 1:
        return None
    (group,) = groups.values()
    weights = group.get("weights") if isinstance(group, dict) else None
    if not isinstance(weights, dict) or group.get("input_activations") is not None:
        return None
    shape = (weights.get("num_bits"), weights.get("type"), weights.get("strategy"), weights.get("symmetric"))
    size = weights.get("group_size")
    if shape != (4, "int", "group", True) or not _int_in(size, 1, None):
        return None
    return size


def _fp8_weight_block(config: dict, source: str) -> tuple[int, int] | None:
    """weight_block_size (n, k) of a block-quantized fp8 checkpoint: output rows and input columns per scale
    (None: per-tensor or per-channel)."""
    quant = config.get("quantization_config") or {}
    if not isinstance(quant, dict) or str(quant.get("quant_method") or "").lower() != "fp8":
        return None
    block = quant.get("weight_block_size")
    if block is None:
        return None
    if not isinstance(block, list) or len(block) != 2 or not all(_int_in(b, 1, 1 << 16) for b in block):
        raise ModelConfigError(
            f"{source}: config.json quantization_config.weight_block_size must be two block sizes [n, k], "
            f"got {json_shown(block)}"
        )
    return block[0], block[1]


def _quantization_config(config: dict) -> object:
    """The language model's quantization_config: Kimi-K2.5 keeps its int4 one inside text_config; Qwen3.5
    at the top."""
    text = config.get("text_config")
    if isinstance(text, dict) and "hidden_size" not in config:
        return config.get("quantization_config") or text.get("quantization_config")
    return config.get("quantization_config")


def quant_group_size(config: dict) -> int | None:
    quant = config.get("quantization_config") or {}
    if not isinstance(quant, dict) or str(quant.get("quant_method") or "").lower() != "compressed-tensors":
        return None
    return _int4_group_size(quant)


def _native_dtype(config: dict, source: str) -> str:
    """The checkpoint's weight dtype; ModelConfigError for one the sizing cannot count bytes for (e.g. mxfp4,
    whose experts no kt-kernel backend reads and whose conversion path the sizing does not model)."""
    quant = config.get("quantization_config") or {}
    method = (quant.get("quant_method") or "") if isinstance(quant, dict) else quant
    method = method if isinstance(method, str) else json.dumps(method, default=str)
    if method.lower() == "fp8":
        return "fp8"
    if method.lower() == "compressed-tensors" and quant_group_size(config):
        return "int4"
    if method.lower() == "compressed-tensors":
        raise ModelConfigError(
            f"{source}: quantization compressed-tensors other than pack-quantized symmetric int4 groups "
            "(config.json quantization_config.config_groups) is not sized by ktinfra; the int4 group format "
            "is the one kt-kernel's RAWINT4 reads"
        )
    if method:
        raise ModelConfigError(
            f"{source}: quantization {name_shown(method)} (config.json quantization_config.quant_method) "
            "is not sized by ktinfra, which sizes bf16, fp16, fp32, fp8 and compressed-tensors int4 "
            "checkpoints"
        )
    key = "torch_dtype" if config.get("torch_dtype") is not None else "dtype"
    value = config.get(key) or "bfloat16"
    dtype = value.lower() if isinstance(value, str) else None
    if dtype not in SIZED_DTYPES:
        raise ModelConfigError(
            f"{source}: config.json {key} {name_shown(value)} is not sized by ktinfra "
            f"({', '.join(SIZED_DTYPES)} are)"
        )
    return SIZED_DTYPES[dtype]


EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts")  # last: ERNIE


def _experts(config: dict, source: str) -> tuple[int, int]:
    """(routed experts per MoE layer, experts routed per token)."""
    num_experts = _need(config, *EXPERT_KEYS, source=source, low=0)
    if num_experts < 2:
        key = next(k for k in EXPERT_KEYS if config.get(k) is not None)
        raise ModelConfigError(
            f"{source}: not a mixture-of-experts model (config.json {key} is {num_experts}); "
            "KT offloads MoE experts"
        )
    keys = ("num_experts_per_tok", "num_experts_per_token", "moe_k")
    return num_experts, _need(config, *keys, source=source, high=num_experts)


def _index_list(config: dict, key: str, layers: int, source: str) -> list[int]:
    value = config.get(key) or []
    if not isinstance(value, list) or not all(_int_in(i, 0, layers - 1) for i in value):
        raise ModelConfigError(
            f"{source}: config.json {key} must list some of the layer indices 0..{layers - 1}, "
            f"got {json_shown(value)}"
        )
    return value


# Layer-placement keys of families the sizing does not model (Jamba: MoE every expert_layer_period-th layer
# from expert_layer_offset, attention every attn_layer_period-th, Mamba in between)
UNSIZED_LAYER_KEYS = ("expert_layer_period", "expert_layer_offset", "attn_layer_period", "attn_layer_offset")


def _moe_layer_count(config: dict, layers: int, source: str) -> int:
    """Layers holding routed experts, by each family's keys: DeepSeek/GLM/Kimi first_k_dense_replace and
    moe_layer_freq, ERNIE moe_layer_start_index/end_index/interval, Llama-4 moe_layers or
    interleave_moe_layer_step, Qwen mlp_only_layers and decoder_sparse_step (the rules of the transformers
    modeling code)."""
    placement = [key for key in UNSIZED_LAYER_KEYS if key in config]
    if placement:  # read as all-MoE, all-attention layers they would be sized about twice too large
        raise ModelConfigError(
            f"{source}: config.json places its layers with {', '.join(placement)} (Jamba-style interleaved "
            "attention/Mamba and MoE layers), which ktinfra does not size; kt-kernel serves no such family"
        )
    if "first_k_dense_replace" in config or "moe_layer_freq" in config:  # DeepSeekV2Config: first k 0
        first = _int_key(config, "first_k_dense_replace", source, low=0, high=layers - 1) or 0
        freq = _int_key(config, "moe_layer_freq", source) or 1
        moe = [i for i in range(first, layers) if i % freq == 0]
    elif "moe_layer_start_index" in config:  # ERNIE-4.5
        start = _int_key(config, "moe_layer_start_index", source, low=0, high=layers - 1) or 0
        end = config.get("moe_layer_end_index")
        if _int_in(end, -1, -1):  # Ernie4_5_MoeConfig's default: the last layer, as transformers reads it
            end = None
        else:
            end = _int_key(config, "moe_layer_end_index", source, low=0, high=layers - 1)
        step = _int_key(config, "moe_layer_interval", source, high=layers) or 1
        moe = [i for i in range(start, layers if end is None else end + 1) if (i + 1) % step == 0]
    elif "moe_layers" in config or "interleave_moe_layer_step" in config:
        step = _int_key(config, "interleave_moe_layer_step", source, high=layers) or 1
        moe = _index_list(config, "moe_layers", layers, source) or list(range(step - 1, layers, step))
    else:
        step = _int_key(config, "decoder_sparse_step", source, high=layers) or 1
        dense = set(_index_list(config, "mlp_only_layers", layers, source))
        moe = [i for i in range(layers) if i not in dense and (i + 1) % step == 0]
    if not moe:
        raise ModelConfigError(f"{source}: config.json leaves none of the {layers} layers with experts")
    return len(set(moe))


def _kda_attention(config: dict, layers: int, source: str) -> LinearAttention | None:
    """Kimi-Linear's linear_attn_config: kda_layers lists its KDA layers (numbered from 1, as SGLang's
    KimiLinearConfig.is_kda_layer reads them), the others are MLA."""
    kda = config["linear_attn_config"]
    where = f"{source} linear_attn_config"
    if not isinstance(kda, dict):
        raise ModelConfigError(
            f"{source}: config.json linear_attn_config must be a mapping, got {json_shown(kda)}"
        )
    numbers = kda.get("kda_layers")
    if not isinstance(numbers, list) or not all(_int_in(i, 0, layers) for i in numbers):
        raise ModelConfigError(
            f"{where}: config.json kda_layers must list layer numbers 1..{layers}, got {json_shown(numbers)}"
        )
    linear = len(set(numbers))
    if not linear:
        return None
    if linear >= layers:
        raise ModelConfigError(f"{where}: config.json kda_layers leaves no full-attention layer")
    heads = _need(kda, "num_heads", source=where)
    head_dim = _need(kda, "head_dim", source=where)
    return LinearAttention(
        num_layers=linear,
        key_heads=heads,
        value_heads=heads,
        key_head_dim=head_dim,
        value_head_dim=head_dim,
        conv_kernel=_need(kda, "short_conv_kernel_size", source=where),
        kda=True,
    )


def _linear_attention(config: dict, layers: int, source: str) -> LinearAttention | None:
    """Qwen3-Next's layer_types (or full_attention_interval), Kimi-Linear's linear_attn_config: which layers
    are linear attention."""
    if config.get("linear_attn_config") is not None:
        return _kda_attention(config, layers, source)
    kinds = config.get("layer_types")
    if kinds is not None and not isinstance(kinds, list):
        raise ModelConfigError(f"{source}: config.json layer_types must be a list, got {json_shown(kinds)}")
    if isinstance(kinds, list):
        if len(kinds) != layers:
            raise ModelConfigError(
                f"{source}: config.json layer_types lists {len(kinds)} layers, num_hidden_layers is {layers}"
            )
        linear = kinds.count("linear_attention")
    elif config.get("full_attention_interval") is not None and "linear_num_value_heads" in config:
        interval = _int_key(config, "full_attention_interval", source, high=layers)
        linear = layers - layers // interval
    else:
        return None
    if not linear:
        return None
    if linear == layers:
        raise ModelConfigError(f"{source}: config.json layer_types has no full_attention layer")
    return LinearAttention(
        num_layers=linear,
        key_heads=_need(config, "linear_num_key_heads", source=source),
        value_heads=_need(config, "linear_num_value_heads", source=source),
        key_head_dim=_need(config, "linear_key_head_dim", source=source),
        value_head_dim=_need(config, "linear_value_head_dim", source=source),
        conv_kernel=_need(config, "linear_conv_kernel_dim", source=source),
    )


def _mla(config: dict, source: str) -> MLA | None:
    kv_lora_rank = _int_key(config, "kv_lora_rank", source, low=0)
    if not kv_lora_rank:
        return None
    return MLA(
        q_lora_rank=_int_key(config, "q_lora_rank", source),
        kv_lora_rank=kv_lora_rank,
        qk_nope_head_dim=_need(config, "qk_nope_head_dim", source=source),
        qk_rope_head_dim=_need(config, "qk_rope_head_dim", source=source),
        v_head_dim=_need(config, "v_head_dim", source=source),
    )


def _indexer(config: dict, mla: MLA | None, source: str) -> SparseIndexer | None:
    """DeepSeek-V3.2-style sparse attention: SGLang treats an MLA model with index_topk as DSA."""
    if mla is None or config.get("index_topk") is None:
        return None
    return SparseIndexer(
        heads=_need(config, "index_n_heads", source=source),
        head_dim=_need(config, "index_head_dim", source=source),
        topk=_need(config, "index_topk", source=source),
    )


# Families whose checkpoint ships MTP layers that config.json does not count: Qwen3-Next's one layer (its
# mtp.* weights; sglang-kt's model_config.py sets num_nextn_predict_layers = 1 for Qwen3NextForCausalLM, and
# qwen3_next_mtp.py uses the target model's embedding and head, none being in the checkpoint).
IMPLICIT_MTP_LAYERS = {"qwen3_next": 1}
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")


def _mtp_layers(config: dict, source: str) -> int:
    """DeepSeek's num_nextn_predict_layers or Qwen3.5's mtp_num_hidden_layers (IMPLICIT_MTP_LAYERS where
    config.json has neither)."""
    for key in MTP_KEYS:
        count = _int_key(config, key, source, low=0)
        if count:
            return count
    if all(config.get(key) is None for key in MTP_KEYS):
        return IMPLICIT_MTP_LAYERS.get(config.get("model_type"), 0)
    return 0


def _mtp_own_embeddings(config: dict, source: str) -> bool:
    """Whether the MTP layers carry their own embedding and head: DeepSeek's do; Qwen3.5's say so with
    mtp_use_dedicated_embeddings (default false), and Qwen3-Next's do not."""
    implicit = config.get("model_type") in IMPLICIT_MTP_LAYERS
    default = "mtp_num_hidden_layers" not in config and not implicit
    return _bool_key(config, "mtp_use_dedicated_embeddings", default, source)


# Families whose attention gates its output by default, with q_proj twice as wide (the attn_output_gate
# default of sglang-kt's qwen3_next.py and qwen3_5.py).
GATED_ATTENTION_FAMILIES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")


# Families whose every MoE block also runs one shared expert of intermediate_size, with no config key to say
# so (transformers Llama4TextMoe.shared_expert).
IMPLICIT_SHARED_EXPERT = ("llama4_text",)


def _shared_intermediate(config: dict, moe_inter: int, source: str) -> int:
    shared = _int_key(config, "shared_expert_intermediate_size", source, low=0)
    if shared:
        return shared
    if config.get("model_type") in IMPLICIT_SHARED_EXPERT:
        return moe_inter
    # DeepSeek/GLM/Kimi n_shared_experts, ERNIE moe_num_shared_experts, Ling/Bailing num_shared_experts
    keys = ("n_shared_experts", "moe_num_shared_experts", "num_shared_experts")
    shared_key = next((key for key in keys if key in config), "n_shared_experts")
    return (_int_key(config, shared_key, source, low=0) or 0) * moe_inter


def _head_dim(config: dict, hidden: int, heads: int, source: str) -> int:
    """config.json head_dim, else hidden_size // num_attention_heads as transformers derives it."""
    head_dim = _int_key(config, "head_dim", source)
    if head_dim:
        return head_dim
    if hidden < heads:  # the derived width would be 0, and so would the KV cache and attention weights
        raise ModelConfigError(
            f"{source}: config.json lacks head_dim and its num_attention_heads {heads} exceeds hidden_size "
            f"{hidden}"
        )
    return hidden // heads


MULTIMODAL_ENCODERS = ("vision_config", "audio_config")
# wrappers whose vision_config builds transformers' Qwen3-VL vision tower: missing keys take its defaults,
# and only Qwen3-VL has deepstack mergers (Qwen3.5's tower leaves them out whatever the config lists)
QWEN3_VL_TOWERS = {"qwen3_vl": True, "qwen3_vl_moe": True, "qwen3_5": False, "qwen3_5_moe": False}
QWEN3_VL_TOWER_DEFAULTS = {
    "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "in_channels": 3, "patch_size": 16,
    "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 3584,
    "num_position_embeddings": 2304,
}  # fmt: skip
QWEN3_VL_DEEPSTACK_DEFAULT = [8, 16, 24]


def _vision(wrapper: dict, source: str) -> VisionEncoder | None:
    """The vision tower of a Qwen3-VL / Qwen3.5 checkpoint; None for other wrappers (left unsized)."""
    deepstack = QWEN3_VL_TOWERS.get(wrapper.get("model_type"))
    vision = wrapper.get("vision_config")
    if deepstack is None or not isinstance(vision, dict):
        return None
    values = {
        key: _int_key(vision, key, f"{source} vision_config") or default
        for key, default in QWEN3_VL_TOWER_DEFAULTS.items()
    }
    indexes = vision.get("deepstack_visual_indexes", QWEN3_VL_DEEPSTACK_DEFAULT)
    if not isinstance(indexes, list):
        raise ModelConfigError(
            f"{source}: config.json vision_config deepstack_visual_indexes must be a list, "
            f"got {json_shown(indexes)}"
        )
    return VisionEncoder(**values, deepstack_mergers=len(indexes) if deepstack else 0)


# Keys of the families (DeepSeek/GLM/Kimi, Qwen-MoE, ERNIE, Ling) whose intermediate_size is the width of
# the dense MLPs and shared experts while moe_intermediate_size is the routed experts': without the latter
# such a config cannot be sized from intermediate_size as a Mixtral-style one is (Qwen3-30B-A3B would count
# 8x its experts, 233B).
DENSE_WIDTH_KEYS = (
    "n_routed_experts", "first_k_dense_replace", "moe_layer_freq", "n_shared_experts", "decoder_sparse_step",
    "mlp_only_layers", "shared_expert_intermediate_size", "moe_layer_start_index", "moe_num_shared_experts",
    "num_shared_experts",
)  # fmt: skip


def from_config(config: dict, *, name: str, hf_repo: str | None = None, path: str | None = None, **extra):
    """Build an Architecture from a config.json mapping (multimodal wrappers: the text_config).

    ModelConfigError, naming the key and the file, for a value a real model cannot have."""
    source = path or name
    for where in (config, config.get("text_config")):
        kind = where.get("model_type") if isinstance(where, dict) else None
        if kind is not None and (not isinstance(kind, str) or not kind.strip()):
            raise ModelConfigError(f"{source}: config.json model_type must be a name, got {json_shown(kind)}")
    wrapper_type = config.get("model_type")  # a multimodal wrapper's own (qwen3_5_moe): templates key on it
    encoders: tuple[str, ...] = ()
    vision = None
    if isinstance(config.get("text_config"), dict) and "hidden_size" not in config:
        vision = _vision(config, source)
        sized = ("vision_config",) if vision else ()
        encoders = tuple(k for k in config if k in MULTIMODAL_ENCODERS and k not in sized)
        config = {**config["text_config"], "quantization_config": _quantization_config(config)}
    num_experts, per_token = _experts(config, source)
    hidden = _need(config, "hidden_size", source=source)
    layers = _need(config, "num_hidden_layers", source=source, high=MAX_LAYERS)
    heads = _need(config, "num_attention_heads", source=source)
    kv_heads = _int_key(config, "num_key_value_heads", source, high=heads) or heads
    if heads % kv_heads:
        raise ModelConfigError(
            f"{source}: config.json num_attention_heads {heads} is not a multiple of num_key_value_heads "
            f"{kv_heads}"
        )
    # Llama-4 names its dense layers' MLP width intermediate_size_mlp and its experts' intermediate_size
    dense_inter = _int_key(config, "intermediate_size_mlp", source, low=0) or 0
    dense_inter = dense_inter or _int_key(config, "intermediate_size", source, low=0) or 0
    mla = _mla(config, source)
    moe_inter = _int_key(config, "moe_intermediate_size", source) or 0
    if not moe_inter:
        dense_keys = [key for key in DENSE_WIDTH_KEYS if config.get(key) is not None]
        if dense_keys:  # intermediate_size is the dense MLP's width, several times an expert's
            raise ModelConfigError(
                f"{source}: config.json lacks moe_intermediate_size (the routed experts' width); its "
                f"{', '.join(dense_keys)} make intermediate_size the dense MLP's"
            )
        moe_inter = _need(config, "intermediate_size", source=source)  # Mixtral-style: the experts' width
    fp8_block = _fp8_weight_block(config, source) or (None, None)
    return Architecture(
        name=name,
        hf_repo=hf_repo,
        path=path,
        model_type=str(wrapper_type or config.get("model_type") or "unknown"),
        hidden_size=hidden,
        num_layers=layers,
        num_dense_layers=layers - _moe_layer_count(config, layers, source),
        dense_intermediate_size=dense_inter,
        moe_intermediate_size=moe_inter,
        num_experts=num_experts,
        experts_per_token=per_token,
        shared_intermediate_size=_shared_intermediate(config, moe_inter, source),
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=_head_dim(config, hidden, heads, source),
        mla=mla,
        vocab_size=_need(config, "vocab_size", source=source),
        tie_word_embeddings=_bool_key(config, "tie_word_embeddings", False, source),
        max_position_embeddings=_int_key(config, "max_position_embeddings", source),
        native_dtype=_native_dtype(config, source),
        quant_group_size=quant_group_size(config),
        fp8_block_n=fp8_block[0],
        fp8_block_k=fp8_block[1],
        num_mtp_layers=_mtp_layers(config, source),
        mtp_own_embeddings=_mtp_own_embeddings(config, source),
        linear_attention=_linear_attention(config, layers, source),
        indexer=_indexer(config, mla, source),
        attention_output_gate=_bool_key(
            config, "attn_output_gate", config.get("model_type") in GATED_ATTENTION_FAMILIES, source
        ),
        vision=vision,
        encoders=encoders,
        **extra,
    )


def _load_entries() -> list[dict]:
    return copy.deepcopy(_parsed_catalog())


@functools.lru_cache(maxsize=1)
def _parsed_catalog() -> list[dict]:
    entries = yaml.safe_load(CATALOG_PATH.read_text())["models"]
    by_name = {e["name"]: e for e in entries}
    for entry in entries:
        base = entry.get("extends")
        if base:
            parent = by_name[base]
            entry["config"] = {**parent["config"], **entry.get("config", {})}
            # not gguf_repo: an extending entry is another checkpoint (Qwen3-30B-A3B-Instruct-2507), and the
            # parent's GGUF holds the parent's weights
            for key in ("legacy_sft_rules", "template"):
                entry.setdefault(key, parent.get(key))
    return entries


def _from_entry(entry: dict) -> Architecture:
    rules = {int(k): v for k, v in (entry.get("legacy_sft_rules") or {}).items()}
    return from_config(
        entry["config"],
        name=entry["name"],
        hf_repo=entry.get("hf_repo"),
        gguf_repo=entry.get("gguf_repo"),
        template=entry.get("template"),
        legacy_sft_rules=rules,
    )


def list_models() -> list[Architecture]:
    return [_from_entry(e) for e in _load_entries()]


def entry_config(name: str) -> dict:
    """A catalog model's config.json keys (its `extends` parent's merged in), a copy the caller may change."""
    resolve(name)  # unknown names and directories fail as --model does
    entry = _catalog_entry(name)
    if entry is None:
        raise UnknownModelError(f"{name} is not a catalog model")
    return entry["config"]


def _keys(entry: dict) -> list[str]:
    return [entry["name"], entry.get("hf_repo") or "", *entry.get("aliases", [])]


def _catalog_entry(model: str) -> dict | None:
    wanted = model.strip().lower()
    return next((e for e in _load_entries() if wanted in (k.lower() for k in _keys(e) if k)), None)


def _as_asked(entry: dict, model: str) -> Architecture:
    """The entry's architecture under the name the user asked for when that names another checkpoint of it
    (DeepSeek-R1 is DeepSeek-V3's architecture, not its weights): the plan names, downloads and serves that
    one. A nickname of the entry's own checkpoint (DeepSeek-V3-671B) keeps the entry's name and repos."""
    arch = _from_entry(entry)
    wanted = model.strip().lower()
    repo = entry.get("hf_repo") or ""
    if wanted in (entry["name"].lower(), repo.lower(), repo.rsplit("/", 1)[-1].lower()):
        return arch
    aliases = entry.get("aliases", [])
    asked = next(a for a in aliases if a.lower() == wanted)
    other = (
        asked
        if "/" in asked
        else next((a for a in aliases if "/" in a and a.rsplit("/", 1)[-1].lower() == wanted), None)
    )
    if other is None:
        return arch
    # its own GGUF conversion is another repo, unknown here; its chat template may be another (DeepSeek-R1)
    template = (entry.get("alias_templates") or {}).get(other, arch.template)
    return replace(arch, name=other.rsplit("/", 1)[-1], hf_repo=other, gguf_repo=None, template=template)


def resolve(model: str) -> Architecture:
    """A catalog short name or alias, a Hugging Face repo id, or a local directory with a config.json."""
    if not model or not model.strip():
        raise UnknownModelError("empty model name")
    try:
        local = Path(model).expanduser()
    except RuntimeError:  # ~name of no user (pathlib: "Could not determine home directory")
        user = model.split("/", 1)[0][:40]
        raise UnknownModelError(f"--model {model[:80]!r}: {user!r} is no user's home directory") from None
    try:
        is_dir = local.is_dir()
    except OSError as exc:  # ENAMETOOLONG and the like: is_dir() only swallows "not found"
        raise UnknownModelError(f"--model {model[:80]!r}: {exc.strerror or exc}") from None
    if is_dir:
        try:
            return _from_directory(local)
        except UnknownModelError as exc:  # no config.json: say so when the name is also a catalog model's
            entry = _catalog_entry(model)
            if entry is None:
                raise
            raise UnknownModelError(
                f"{exc}; {model.strip()!r} also names the catalog model {entry['name']}, which --model "
                "takes from a directory without a folder of that name"
            ) from None
    entry = _catalog_entry(model)
    if entry is not None:
        return _as_asked(entry, model)
    known = ", ".join(e["name"] for e in _load_entries())
    hint = ""
    if re.fullmatch(r"[\w.-]+/[\w.-]+", model.strip()) and not model.startswith("."):
        hint = (
            f" (not a catalog repo id and no directory here: download it, e.g. `hf download {model.strip()} "
            "--local-dir DIR`, and pass --model DIR: its config.json is read)"
        )
    elif "/" in model:
        hint = " (a local path must be a directory with config.json)"
    raise UnknownModelError(f"unknown model {model!r}{hint}; known: {known}")


def _from_directory(directory: Path) -> Architecture:
    config_path = directory / "config.json"
    try:
        found = config_path.is_file()
    except OSError as exc:  # a folder it may not search (EACCES): is_file() only swallows "not found"
        raise ModelConfigError(f"{config_path}: cannot read it ({exc.strerror or exc})") from None
    if not found:
        raise UnknownModelError(
            f"{directory} has no config.json; point --model at a Hugging Face model directory"
        )
    config = _read_config(config_path)
    catalog_match = _catalog_match(config)
    extra = {}
    if catalog_match is not None:
        extra = {
            "gguf_repo": catalog_match.gguf_repo,
            "template": catalog_match.template,
            "legacy_sft_rules": catalog_match.legacy_sft_rules,
        }
    resolved = directory.resolve()  # `--model .` names the model after the folder, not ""
    return from_config(config, name=resolved.name or str(resolved), path=str(resolved), **extra)


def _read_config(config_path: Path) -> dict:
    try:
        config = json.loads(config_path.read_text())
    except OSError as exc:
        raise ModelConfigError(f"{config_path}: cannot read it ({exc.strerror or exc})") from exc
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, nesting too deep
        why = str(exc)[:200] or type(exc).__name__
        raise ModelConfigError(f"{config_path}: not valid JSON ({why})") from exc
    if not isinstance(config, dict):
        raise ModelConfigError(f"{config_path}: expected a JSON object")
    return config


def unverified_architecture(arch: Architecture) -> str | None:
    """A warning when the model's architecture is none of the catalog's: nobody checked that kt-kernel and
    SGLang-KT run it, nor that the sizing formulas fit it."""
    known = sorted({model.model_type for model in list_models()})
    if arch.model_type in known:
        return None
    return (
        f"architecture {arch.model_type} is outside the catalog's ({', '.join(known)}): kt-kernel and "
        "SGLang-KT support for it is unverified, and so is this sizing"
    )


def unsized_encoders(arch: Architecture) -> str | None:
    """A warning when the checkpoint carries encoders (vision, audio) the sizing leaves out."""
    if not arch.encoders:
        return None
    return (
        f"config.json has {' and '.join(arch.encoders)}: the sizing counts the language model only "
        f"({arch.total_params / 1e9:.1f}B parameters); GPU weights and the download are low by the "
        "encoder's weights"
    )


def _catalog_match(config: dict) -> Architecture | None:
    """The catalog entry with the same architecture, so local copies keep the known rule files."""
    try:
        local = from_config(config, name="local")
    except ModelConfigError:
        return None
    shape = (local.model_type, local.hidden_size, local.num_layers, local.num_experts)
    for arch in list_models():
        if (arch.model_type, arch.hidden_size, arch.num_layers, arch.num_experts) == shape:
            return arch
    return None
