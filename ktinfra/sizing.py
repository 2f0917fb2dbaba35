"""GPU memory, CPU RAM and data-disk estimates for KT serving and KT LoRA fine-tuning.

Everything is computed from the architecture in ktinfra.catalog; the constants below are the only
assumptions, each explained in docs/planning.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ktinfra import gguf_files
from ktinfra.architecture import Architecture

GB = 1e9

# Serving: a server is useful once it can hold one request of this many tokens in its KV cache.
SERVE_MIN_KV_TOKENS = 4096
KV_BYTES_PER_ELEMENT = 2  # SGLang keeps the KV cache in the model dtype (bf16)
# DeepSeek-V3.2's indexer keys: SGLang's NSATokenToKVPool stores them in fp8 with one fp32 scale per 128
# (index_k_with_scale_buffer), beside the bf16 MLA latent (its default below SM100).
INDEX_K_SCALE_BLOCK = 128
# Hybrid models' linear-attention state (sglang-kt 0.7.2 configs/mamba_utils.py): the convolution window in
# bf16, the recurrent matrix in fp32 (mamba_ssm_dtype's default). SGLang keeps it in a pool of its own and,
# with the radix cache on and the default no_buffer strategy, admits max_mamba_cache_size // 3 running
# requests (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO), so each request needs 3 slots.
CONV_STATE_BYTES = 2
RECURRENT_STATE_BYTES = 4
STATE_SLOTS_PER_REQUEST = 3
# Python, torch, SGLang / LLaMA-Factory processes, tokenizer, pinned staging buffers.
HOST_RUNTIME_RAM = 3 * GB
SERVE_OUTPUT_DISK = 1 * GB  # logs, LoRA conversions, bench results

# Fine-tuning (LLaMA-Factory LoRA on the KT backend).
SFT_CUTOFF_LEN = 2048
SFT_LORA_RANK = 8
LORA_STATE_BYTES = 16  # fp32 weight + fp32 grad + two fp32 AdamW moments per trainable parameter
# At the step's peak, the loss's backward: log_softmax's saved fp32 output, the fp32 gradient nll_loss hands
# it and the fp32 gradient it returns (the Trainer has dropped the bf16 logits by then). Measured: 12 bytes
# per vocabulary element on all three architectures (benchmarks/sft_vram.py --trace).
LOGITS_BYTES_PER_ELEMENT = 12
SFT_SAVED_CHECKPOINTS = 3
# Beyond torch's allocated peak, an SFT run holds (H100, torch 2.11, CUDA 13; benchmarks/sft_vram.py,
# docs/results/2026-11-22-h100-sft-vram): 0.75 GiB of CUDA context and library workspaces, and the caching
# allocator's freed-but-kept blocks: 7-10 bytes per vocabulary element of the step with gradient
# checkpointing (the loss's vocabulary-wide fp32 tensors, after steps of varying length), 10-16 % of the
# activations without it.
SFT_CUDA_RUNTIME = 0.8 * GB
SFT_ALLOCATOR_CACHE_PER_LOGIT = 10  # bytes per vocabulary element of the step (7-10 measured)
SFT_ALLOCATOR_CACHE_OF_ACTIVATIONS = 0.16
SFT_OUTPUT_DISK = 2 * GB  # logs, the final adapter, its SGLang conversion

FP8_BLOCK = 128 * 128  # DeepSeek-style block-wise FP8 keeps one fp32 scale per 128x128 block
INT4_DEFAULT_GROUP = 32  # Kimi-K2-Thinking's compressed-tensors group size


@dataclass(frozen=True)
class CpuFormat:
    name: str  # the --cpu-format spelling
    kt_method: str  # SGLang --kt-method
    weight_format: str  # contract's serve.kt_weight_format
    bytes_per_param: float
    converted: bool  # needs convert_cpu_weights.py output on disk
    native_dtype: str | None = None  # the checkpoint dtype the kt-kernel reads in place
    gguf: bool = False

    def serves(self, published: str) -> bool:
        """Whether this backend can serve a model published in `published` dtype: FP8 and RAWINT4 read only
        their own checkpoints, and nothing but RAWINT4 reads int4 experts (no conversion path)."""
        if self.native_dtype in ("fp8", "int4"):
            return published == self.native_dtype
        return published != "int4"


# GGUF quants kt-kernel's LLAMAFILE backend serves (not those in gguf_files.KT_LLAMAFILE_FAILS): bits per
# routed-expert weight of each llama.cpp file type, from ggml's block sizes and llama.cpp's per-tensor rules
# (ktinfra.gguf_files.EXPERT_MIX: Q8_0 8.5 and Q6_K 6.5625 exactly; the mixed K/IQ types are averages over
# the layers, e.g. Q5_K_M 5.68, Q3_K_M 3.81, Q2_K 2.90 with its down projections in Q3_K). Q4_K_M keeps the
# 4.85 it always had here (the rule gives 4.84: 4.5-bit Q4_K blocks with half of the down projections in
# Q6_K). With --weight-path at the .gguf files, the plan takes the bytes from their headers instead
# (ktinfra.plan.serve).
GGUF_Q4_K_M_BITS = 4.85
GGUF_FORMATS: dict[str, CpuFormat] = {
    f"GGUF:{quant}": CpuFormat(
        f"GGUF:{quant}",
        "LLAMAFILE",
        f"gguf:{quant}",
        (GGUF_Q4_K_M_BITS if quant == "Q4_K_M" else gguf_files.expert_bits_per_weight(quant)) / 8,
        converted=False,
        gguf=True,
    )
    for quant in gguf_files.EXPERT_MIX
    if not gguf_files.llamafile_failure(gguf_files.mix_types(quant))  # kt-kernel cannot serve the others
}
DEFAULT_GGUF = "GGUF:Q4_K_M"  # LLAMAFILE without a quant named (and the table's GGUF row)

# INT8/INT4: one fp32 scale per output row (<= 0.2 % for hidden sizes >= 2048). Of the GGUF quants, the
# table (`ktinfra models`) shows Q4_K_M; --cpu-format takes any of GGUF_FORMATS.
CPU_FORMATS: dict[str, CpuFormat] = {
    "AMXINT8": CpuFormat("AMXINT8", "AMXINT8", "int8", 1.0, converted=True),
    "AMXINT4": CpuFormat("AMXINT4", "AMXINT4", "int4", 0.5, converted=True),
    "BF16": CpuFormat("BF16", "BF16", "bf16", 2.0, converted=False, native_dtype="bf16"),
    "FP8": CpuFormat("FP8", "FP8", "fp8", 1.0 + 4 / FP8_BLOCK, converted=False, native_dtype="fp8"),
    # the checkpoint's own int4 experts, read by kt-kernel and SGLang alike (Kimi-K2-Thinking tutorial)
    "RAWINT4": CpuFormat(
        "RAWINT4", "RAWINT4", "rawint4", 0.5 + 2 / INT4_DEFAULT_GROUP, converted=False, native_dtype="int4"
    ),
    DEFAULT_GGUF: GGUF_FORMATS[DEFAULT_GGUF],
}
_FORMAT_ALIASES = {"INT8": "AMXINT8", "INT4": "AMXINT4", "LLAMAFILE": DEFAULT_GGUF, "GGUF": DEFAULT_GGUF}


def _key(name: str) -> str:
    return name.strip().upper().replace("-", "_")


def gguf_quant_named(name: str) -> str | None:
    """The GGUF quant a --cpu-format spelling names (GGUF:Q8_0, gguf_q8_0, or a bare Q8_0 / IQ2_XXS), None
    for any other spelling, LLAMAFILE and GGUF included (they name the backend, not a quant)."""
    key = _key(name)
    for prefix in ("GGUF:", "GGUF_"):
        if key.startswith(prefix):
            return key.removeprefix(prefix)
    return key if key in gguf_files.EXPERT_MIX and key.startswith(("Q", "IQ")) else None


def cpu_format(name: str) -> CpuFormat:
    key = _FORMAT_ALIASES.get(_key(name), _key(name))
    if key in CPU_FORMATS:
        return CPU_FORMATS[key]
    quant = gguf_quant_named(name)
    if quant is not None and f"GGUF:{quant}" in GGUF_FORMATS:
        return GGUF_FORMATS[f"GGUF:{quant}"]
    quants = ", ".join(format.removeprefix("GGUF:") for format in GGUF_FORMATS)
    if quant is not None:
        what = (
            "a llama.cpp quant not offered" if quant in gguf_files.FILE_TYPE_NAMES else "unknown GGUF quant"
        )
        why = quant in gguf_files.EXPERT_MIX and gguf_files.llamafile_failure(gguf_files.mix_types(quant))
        if why:
            raise ValueError(f"--cpu-format {name}: {quant} puts {why}; GGUF:<TYPE> takes one of {quants}")
        raise ValueError(f"--cpu-format {name}: {what} for LLAMAFILE; GGUF:<TYPE> takes TYPE one of {quants}")
    formats = ", ".join(f for f in CPU_FORMATS if f != DEFAULT_GGUF)
    raise ValueError(
        f"unknown CPU weight format {name!r}; choose one of {formats} or GGUF:<TYPE> (LLAMAFILE; TYPE one "
        f"of {quants})"
    )


@dataclass
class Estimate:
    vram_bytes: int
    ram_bytes: int
    disk_bytes: int
    breakdown: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "vram_bytes": self.vram_bytes,
            "ram_bytes": self.ram_bytes,
            "disk_bytes": self.disk_bytes,
            "breakdown": dict(self.breakdown),
        }


def checkpoint_bytes(arch: Architecture, params: int, dtype: str, *, embeddings: int = 0) -> float:
    """Bytes of `params` weights stored in `dtype`; FP8 checkpoints keep embeddings/LM head in bf16; int4
    (compressed-tensors) packs two weights a byte with one bf16 scale per group."""
    if dtype == "fp8":
        return (params - embeddings) * (1 + 4 / FP8_BLOCK) + embeddings * 2
    if dtype == "int4":
        return params * (0.5 + 2 / (arch.quant_group_size or INT4_DEFAULT_GROUP))
    return params * {"bf16": 2, "fp16": 2, "fp32": 4}.get(dtype, 2)


def dense_dtype(dtype: str) -> str:
    """The dtype of an int4 checkpoint's non-expert weights: its compressed-tensors `ignore` list keeps
    attention, dense and shared MLPs, routers, embedding and head in bf16 (Kimi-K2-Thinking)."""
    return "bf16" if dtype == "int4" else dtype


def encoder_bytes(arch: Architecture) -> float:
    """The sized vision encoder, always bf16: checkpoints ship it unquantized, SGLang builds it with
    quant_config=None and LLaMA-Factory freezes it (0 without one)."""
    return checkpoint_bytes(arch, arch.encoder_params, "bf16")


def gpu_non_expert_bytes(arch: Architecture, dtype: str) -> float:
    """The language model's non-expert weights in `dtype`, and the vision encoder (encoder_bytes). An FP8
    checkpoint keeps the MoE routers in bf16 with the embedding and head (DeepSeek-V3's mlp.gate.weight has
    no scale; SGLang builds MoEGate and the Qwen/Kimi gates with quant_config=None)."""
    unquantized = arch.embedding_params + arch.lm_head_params + arch.router_params
    language = checkpoint_bytes(arch, arch.non_expert_params, dense_dtype(dtype), embeddings=unquantized)
    return language + encoder_bytes(arch)


def kv_heads_held(arch: Architecture, tp: int) -> int:
    """Grouped KV heads over the `tp` ranks: split, at least one per rank (SGLang's get_num_kv_heads), so
    TP beyond the KV heads replicates them."""
    return max(1, arch.num_kv_heads // tp) * tp


def tp_extra_params(arch: Architecture, tp: int) -> int:
    """Non-expert weights that tensor parallelism adds over one copy: SGLang keeps the routers and MLA's
    q_a / kv_a down-projections whole on every rank (ReplicatedLinear, MoEGate in deepseek_v2.py and
    qwen3_moe.py), so is a DSA model's lightning indexer (wq_b, wk and weights_proj, nsa_indexer.py), and
    grouped K/V projections are replicated past one head per rank as the KV cache is."""
    if tp <= 1:
        return 0
    h = arch.hidden_size
    whole = arch.router_params
    extra_kv = 0
    if arch.mla:
        m = arch.mla
        whole += h * ((m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim) * arch.num_kv_layers
        if arch.indexer:
            whole += arch.indexer.params_per_layer(h, m.q_lora_rank) * arch.num_kv_layers
    else:
        extra_kv = (kv_heads_held(arch, tp) - arch.num_kv_heads) * 2 * arch.head_dim * h * arch.num_kv_layers
    return whole * (tp - 1) + extra_kv


def tp_extra_bytes(arch: Architecture, tp: int, dtype: str) -> float:
    """tp_extra_params in the checkpoint's non-expert dtype, the replicated routers in bf16 as
    gpu_non_expert_bytes keeps them."""
    routers = arch.router_params * (tp - 1) if tp > 1 else 0
    return checkpoint_bytes(arch, tp_extra_params(arch, tp), dense_dtype(dtype), embeddings=routers)


def gpu_expert_bytes(arch: Architecture, dtype: str) -> float:
    """One routed expert of one layer, as SGLang holds it when placed on the GPU."""
    return checkpoint_bytes(arch, arch.expert_params, dtype)


def index_key_bytes_per_token(arch: Architecture) -> int:
    """A DSA model's fp8 index keys with one fp32 scale per block, over its layers (0 without an indexer)."""
    if not arch.indexer:
        return 0
    dim = arch.indexer.head_dim
    return (dim + dim // INDEX_K_SCALE_BLOCK * 4) * arch.num_kv_layers


def kv_bytes_per_token(arch: Architecture, tp: int = 1) -> int:
    """One token's KV cache summed over the `tp` ranks of a tensor-parallel group, as SGLang lays it out:
    an MLA latent (and DSA index key) is replicated on every rank; grouped KV heads as kv_heads_held."""
    one_copy = arch.kv_elements_per_token * KV_BYTES_PER_ELEMENT + index_key_bytes_per_token(arch)
    if arch.mla:
        return one_copy * tp
    return one_copy * kv_heads_held(arch, tp) // arch.num_kv_heads


def mla_profiled_bytes_per_token(arch: Architecture) -> int:
    """What sglang-kt 0.7.2's memory profile counts for one token of an MLA pool on one rank: (qk_nope +
    qk_rope) values a layer where the pool stores kv_lora_rank + qk_rope (get_cell_size_per_token)."""
    m = arch.mla
    values = (m.qk_nope_head_dim + m.qk_rope_head_dim) * arch.num_kv_layers
    return values * KV_BYTES_PER_ELEMENT + index_key_bytes_per_token(arch)


def state_bytes_per_slot(arch: Architecture) -> int:
    """One slot of a hybrid model's linear-attention state pool (SGLang's mamba_cache_per_req); 0 for a
    model without linear attention."""
    linear = arch.linear_attention
    if not linear:
        return 0
    conv, recurrent = linear.state_elements_per_layer()
    return (conv * CONV_STATE_BYTES + recurrent * RECURRENT_STATE_BYTES) * linear.num_layers


def state_bytes_per_request(arch: Architecture) -> int:
    return state_bytes_per_slot(arch) * STATE_SLOTS_PER_REQUEST


def download_bytes(arch: Architecture, dtype: str | None = None) -> float:
    """The Hugging Face checkpoint as published (MTP layers and a bf16 vision encoder included)."""
    dtype = dtype or arch.native_dtype
    # kept in bf16 by an FP8 checkpoint: embeddings, heads, the routers and each MTP layer's eh_proj (an
    # unquantized nn.Linear in SGLang's deepseek_nextn.py)
    embeddings = (
        arch.embedding_params + arch.lm_head_params + arch.mtp_embedding_params + arch.router_params
        + arch.num_mtp_layers * (arch.hidden_size * arch.num_experts + 2 * arch.hidden_size**2)
    )  # fmt: skip
    encoder = encoder_bytes(arch)
    if dtype == "int4":
        dense = arch.non_expert_params + arch.mtp_params
        experts = checkpoint_bytes(arch, arch.routed_expert_params, dtype)
        return checkpoint_bytes(arch, dense, "bf16") + experts + encoder
    return checkpoint_bytes(arch, arch.total_params + arch.mtp_params, dtype, embeddings=embeddings) + encoder


def new_download_bytes(arch: Architecture) -> float:
    """What still has to be downloaded: nothing for a local model directory, whose checkpoint is there."""
    return 0.0 if arch.path else download_bytes(arch)


def serve_checkpoint_dtype(arch: Architecture, fmt: CpuFormat) -> str:
    """The checkpoint the planner serves from: BF16-native serving of an FP8 model reads a BF16 conversion
    (ktinfra.plan.formats.checkpoint_dtype); every other format the published dtype."""
    return "bf16" if fmt.native_dtype == "bf16" else arch.native_dtype


def serve(
    arch: Architecture,
    fmt: str | CpuFormat = "AMXINT8",
    *,
    checkpoint_dtype: str | None = None,
    cpu_expert_bytes: int | None = None,
) -> Estimate:
    """Serving with SGLang + kt-kernel: non-expert weights and the KV cache on the GPU, every routed expert
    in CPU RAM in the chosen format. `checkpoint_dtype` is the dtype of the checkpoint passed as --model
    (default: the one the planner picks, serve_checkpoint_dtype); `cpu_expert_bytes` the experts as the
    weight files on disk hold them (a GGUF directory's headers), in place of the format's bytes per weight."""
    fmt = cpu_format(fmt) if isinstance(fmt, str) else fmt
    dtype = checkpoint_dtype or serve_checkpoint_dtype(arch, fmt)
    if fmt.native_dtype in ("fp8", "int4") and dtype != fmt.native_dtype:
        raise ValueError(
            f"{arch.name}: the {fmt.kt_method} backend reads an {fmt.native_dtype.upper()} checkpoint; "
            f"this one is {dtype}"
        )
    gpu_weights = gpu_non_expert_bytes(arch, dtype)
    kv = kv_bytes_per_token(arch) * SERVE_MIN_KV_TOKENS
    state = state_bytes_per_request(arch)  # the one request's linear-attention state slots
    if cpu_expert_bytes is not None:
        cpu_experts = cpu_expert_bytes
    elif fmt.native_dtype == "int4":
        cpu_experts = checkpoint_bytes(arch, arch.routed_expert_params, "int4")  # the checkpoint's group size
    else:
        cpu_experts = arch.routed_expert_params * fmt.bytes_per_param
    download = new_download_bytes(arch)
    # DeepSeek's fp8_cast_bf16.py: BF16 serving reads a BF16 copy of an FP8 checkpoint (fp16/fp32 in place)
    conversion = download_bytes(arch, "bf16") if arch.native_dtype == "fp8" and dtype == "bf16" else 0.0
    if fmt.gguf:
        converted = arch.total_params * fmt.bytes_per_param  # the whole model as one GGUF download
    elif fmt.converted or fmt.native_dtype != dtype:
        converted = cpu_experts
    else:
        converted = 0.0  # the kt-kernel reads the experts straight from the checkpoint
    breakdown = {
        "gpu_weights": gpu_weights,
        "kv_cache_min": kv,
        **({"recurrent_state_min": state} if state else {}),
        "cpu_experts": cpu_experts,
        "host_runtime": HOST_RUNTIME_RAM,
        "download": download,
        **({"bf16_conversion": conversion} if conversion else {}),
        "cpu_weights_on_disk": converted,
        "outputs": SERVE_OUTPUT_DISK,
    }
    return Estimate(
        vram_bytes=int(gpu_weights + kv + state),
        ram_bytes=int(cpu_experts + HOST_RUNTIME_RAM),
        disk_bytes=int(download + conversion + converted + SERVE_OUTPUT_DISK),
        breakdown={k: int(v) for k, v in breakdown.items()},
    )


def _attention_linears(arch: Architecture) -> list[tuple[int, int]]:
    """(in, out) features of one layer's attention projections."""
    h = arch.hidden_size
    heads = arch.num_attention_heads
    if arch.mla:
        m = arch.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank is None:
            attn = [(h, heads * qk)]
        else:
            attn = [(h, m.q_lora_rank), (m.q_lora_rank, heads * qk)]
        attn += [
            (h, m.kv_lora_rank + m.qk_rope_head_dim),
            (m.kv_lora_rank, heads * (m.qk_nope_head_dim + m.v_head_dim)),  # k_nope and v
        ]
        return attn + [(heads * m.v_head_dim, h)]
    d = arch.head_dim
    q = heads * d * (2 if arch.attention_output_gate else 1)
    return [(h, q), (h, arch.num_kv_heads * d), (h, arch.num_kv_heads * d), (heads * d, h)]


def _linear_attention_linears(arch: Architecture) -> list[tuple[int, int]]:
    """(in, out) features of one linear-attention layer's projections (none without such layers): Gated
    DeltaNet as transformers' Qwen3.5 lays it out (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj;
    Qwen3-Next fuses them into in_proj_qkvz / in_proj_ba, the same widths), Kimi Delta Attention's q, k,
    v, the low-rank forget and output gates (f_a/f_b, g_a/g_b), b_proj and o_proj."""
    linear = arch.linear_attention
    if not linear:
        return []
    h = arch.hidden_size
    k = linear.key_heads * linear.key_head_dim
    v = linear.value_heads * linear.value_head_dim
    if linear.kda:
        d = linear.value_head_dim
        return [(h, k), (h, k), (h, v), (h, d), (d, v), (h, d), (d, v), (h, linear.value_heads), (v, h)]
    return [(h, 2 * k + v), (h, v), (h, linear.value_heads), (h, linear.value_heads), (v, h)]


def _mixers(arch: Architecture) -> list[tuple[list[tuple[int, int]], int, int]]:
    """Each kind of token mixer: (its projections, its per-token activation width, how many layers)."""
    mixers = [(_attention_linears(arch), arch.attention_activation_width, arch.num_kv_layers)]
    linears = _linear_attention_linears(arch)
    if linears:
        # the projections' outputs and the mixer's output
        mixers.append(
            (linears, sum(o for _, o in linears[:-1]) + linears[-1][0], arch.linear_attention.num_layers)
        )
    return mixers


def lora_params_gpu(arch: Architecture, rank: int) -> int:
    """LoRA A+B matrices on every linear layer that stays on the GPU (lora_target: all); a hybrid model's
    linear-attention layers have their own projections."""
    h = arch.hidden_size
    per_layer = sum(sum(rank * (i + o) for i, o in linears) * count for linears, _, count in _mixers(arch))
    mlp = 3 * rank * (h + arch.dense_intermediate_size) * arch.num_dense_layers
    shared = (
        3 * rank * (h + arch.shared_intermediate_size) * arch.num_moe_layers
        if arch.shared_intermediate_size
        else 0
    )
    return per_layer + mlp + shared


def lora_input_width(
    arch: Architecture, mlp_width: int, moe: bool, mixer: list[tuple[int, int]] | None = None
) -> int:
    """Per-token elements of the fp32 input copies one layer's LoRA modules keep for backward: PEFT casts
    each wrapped linear's input to the adapter's dtype, which LLaMA-Factory upcasts to fp32, one copy per
    module even where modules share an input (measured: docs/results/2026-11-22-h100-sft-vram). `mixer`:
    the layer's attention projections (default: softmax attention's)."""
    width = sum(i for i, _ in (mixer if mixer is not None else _attention_linears(arch)))
    if mlp_width:
        width += 2 * arch.hidden_size + mlp_width  # gate, up (hidden in), down (MLP width in)
    if moe:
        width += arch.hidden_size  # the router, a linear layer the KT MoE wrapper keeps on the GPU
    return width


def lora_params_experts(arch: Architecture, rank: int) -> int:
    """LoRA on every routed expert, trained by the kt-kernel on the CPU."""
    per_expert = 3 * rank * (arch.hidden_size + arch.moe_intermediate_size)
    return per_expert * arch.num_experts * arch.num_moe_layers


FP8_SFT_BLOCK = 128  # kt-kernel 0.7.2 sft/amx.py: 128x128 scale blocks, widths in whole blocks
SFT_EXPERT_DTYPES = ("bf16", "fp8")  # the routed experts kt-kernel trains LoRA on: BF16, or FP8 in place


def sft_expert_bytes(arch: Architecture, expert_dtype: str = "bf16") -> float:
    """The routed experts in CPU RAM as kt-kernel trains on them: BF16 (AMXBF16_SFT, from a BF16 checkpoint
    or the BF16 copy of an FP8 one), or the checkpoint's block-FP8 weights with one fp32 scale per 128x128
    block (AMXFP8_SFT)."""
    if expert_dtype not in SFT_EXPERT_DTYPES:
        raise ValueError(f"SFT trains BF16 or FP8 experts, not {expert_dtype!r}")
    return checkpoint_bytes(arch, arch.routed_expert_params, expert_dtype)


def sft(
    arch: Architecture,
    *,
    cutoff_len: int = SFT_CUTOFF_LEN,
    batch_size: int = 1,
    lora_rank: int = SFT_LORA_RANK,
    gradient_checkpointing: bool = True,
    expert_dtype: str = "bf16",
) -> Estimate:
    """LoRA fine-tuning with LLaMA-Factory + KT: non-expert weights, their LoRA and the activations on the
    GPU; the routed experts, their LoRA and its AdamW state in CPU RAM. expert_dtype "bf16" (the default):
    from BF16 weights, a BF16 copy of an FP8 checkpoint on disk beside it; "fp8": an FP8
    checkpoint's experts as published, no copy (LLaMA-Factory still dequantizes the non-expert weights it
    puts on the GPU to BF16: FineGrainedFP8Config(dequantize=True), so VRAM does not change).

    With gradient checkpointing (LLaMA-Factory's default) the GPU keeps one hidden state per layer and the
    working set of the layer being recomputed; without it (the legacy KT DeepSeek model, see
    ktinfra.plan.sft) it keeps the working set of every layer."""
    tokens = cutoff_len * batch_size
    h = arch.hidden_size
    gpu_weights = gpu_non_expert_bytes(arch, "bf16")
    lora_gpu = lora_params_gpu(arch, lora_rank) * LORA_STATE_BYTES

    def layer_bytes(mlp_width: int, moe: bool) -> int:
        """One layer's saved activations per token: bf16 tensors plus the LoRA inputs' fp32 copies, for the
        larger of a hybrid model's two kinds of layer."""
        return max(
            (8 * h + width + 4 * mlp_width) * 2 + lora_input_width(arch, mlp_width, moe, linears) * 4
            for linears, width, _ in _mixers(arch)
        )

    dense = layer_bytes(arch.dense_intermediate_size, False) if arch.num_dense_layers else 0
    moe = layer_bytes(arch.shared_intermediate_size, True) if arch.num_moe_layers else 0
    if gradient_checkpointing:
        checkpoints = arch.num_layers * tokens * h * 2
        layer_working_set = tokens * max(dense, moe)
    else:
        checkpoints = 0
        layer_working_set = tokens * (arch.num_dense_layers * dense + arch.num_moe_layers * moe)
    logits = tokens * arch.vocab_size * LOGITS_BYTES_PER_ELEMENT
    if expert_dtype == "fp8" and arch.native_dtype != "fp8":
        raise ValueError(no_fp8_experts(arch))
    cpu_experts = sft_expert_bytes(arch, expert_dtype)
    lora_cpu = lora_params_experts(arch, lora_rank) * LORA_STATE_BYTES
    download = new_download_bytes(arch)
    bf16_copy = (
        download_bytes(arch, "bf16") if arch.native_dtype != "bf16" and expert_dtype == "bf16" else 0.0
    )
    adapter = (lora_params_gpu(arch, lora_rank) + lora_params_experts(arch, lora_rank)) * LORA_STATE_BYTES
    outputs = adapter * SFT_SAVED_CHECKPOINTS + SFT_OUTPUT_DISK
    # With checkpointing the loss's backward is done (its tensors freed) before the last layer is
    # recomputed, so the peak holds the larger of the two; without, every layer's activations are live then.
    activations = checkpoints + (
        max(layer_working_set, logits) if gradient_checkpointing else layer_working_set + logits
    )
    breakdown = {
        "gpu_weights": gpu_weights,
        "lora_gpu_train_state": lora_gpu,
        "activation_checkpoints": checkpoints,
        "layer_working_set": layer_working_set,
        "logits": logits,
        # not in vram_bytes (torch's allocated peak); the planner reserves them on each GPU
        "cuda_runtime": SFT_CUDA_RUNTIME,
        "allocator_cache": max(
            tokens * arch.vocab_size * SFT_ALLOCATOR_CACHE_PER_LOGIT,
            SFT_ALLOCATOR_CACHE_OF_ACTIVATIONS * activations,
        ),
        "cpu_experts": cpu_experts,
        "lora_cpu_train_state": lora_cpu,
        "host_runtime": HOST_RUNTIME_RAM,
        "download": download,
        "bf16_conversion": bf16_copy,
        "outputs": outputs,
    }
    return Estimate(
        vram_bytes=int(gpu_weights + lora_gpu + activations),
        ram_bytes=int(cpu_experts + lora_cpu + HOST_RUNTIME_RAM),
        disk_bytes=int(download + bf16_copy + outputs),
        breakdown={k: int(v) for k, v in breakdown.items()},
    )


def sft_per_gpu_bytes(est: Estimate, gpus: int) -> float:
    """One GPU's share of an SFT estimate: weights and LoRA state shard across GPUs (FSDP2 / the legacy
    multi-GPU placement rules), while every data-parallel rank holds its own activations and logits."""
    b = est.breakdown
    shared = b["gpu_weights"] + b["lora_gpu_train_state"]
    return shared / max(gpus, 1) + (est.vram_bytes - shared)


def sft_gpu_runtime_bytes(est: Estimate) -> float:
    """What each GPU holds beyond torch's allocated peak: CUDA context and the allocator's cache."""
    return est.breakdown["cuda_runtime"] + est.breakdown["allocator_cache"]


def no_fp8_experts(arch: Architecture) -> str:
    return f"{arch.name} ships {arch.native_dtype}: it has no FP8 experts to train in place"


def fp8_sft_shape_problem(arch: Architecture) -> str | None:
    """Why kt-kernel's FP8 LoRA cannot read this model's FP8 experts as they are shaped (None: it can)."""
    if arch.native_dtype != "fp8":
        return no_fp8_experts(arch)
    if (arch.fp8_block_n, arch.fp8_block_k) != (FP8_SFT_BLOCK, FP8_SFT_BLOCK):
        block = (
            f"weight_block_size [{arch.fp8_block_n}, {arch.fp8_block_k}]"
            if arch.fp8_block_n
            else "no block-wise scales"
        )
        return f"kt-kernel's FP8 LoRA reads 128x128 block FP8 only; {arch.name} has {block}"
    odd = [
        f"{key} {value}"
        for key, value in (
            ("hidden_size", arch.hidden_size),
            ("moe_intermediate_size", arch.moe_intermediate_size),
        )
        if value % FP8_SFT_BLOCK
    ]
    if odd:
        return f"kt-kernel's FP8 LoRA needs multiples of {FP8_SFT_BLOCK}; {arch.name} has {' and '.join(odd)}"
    return None


def table(arch: Architecture) -> dict:
    """Every serve format the model can use, sized from the checkpoint `ktinfra plan` would serve it from,
    plus SFT from BF16 and, for a model whose FP8 experts kt-kernel can train in place, on them
    (`--expert-format fp8`), for `ktinfra models`."""
    rows = {}
    for name, fmt in CPU_FORMATS.items():
        if not fmt.serves(arch.native_dtype):
            continue
        rows[f"serve:{name}"] = serve(arch, fmt).to_dict()
    rows["sft:BF16"] = sft(arch).to_dict()
    if fp8_sft_shape_problem(arch) is None:
        rows["sft:FP8"] = sft(arch, expert_dtype="fp8").to_dict()
    return rows
