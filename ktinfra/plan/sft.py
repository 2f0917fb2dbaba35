"""SFT decisions: a LLaMA-Factory LoRA recipe on the KT backend, in the chosen stack generation's keys."""

from __future__ import annotations

from ktinfra import sizing
from ktinfra.architecture import Architecture
from ktinfra.plan.host import (
    ISA_UNKNOWN,
    amx_unknown,
    cpu_worker_threads,
    gb,
    gb_apart,
    gpu_memory_bytes,
    gpu_names,
    has_amx,
    kt_capable_groups,
    left_out_reason,
    mig_reason,
    mig_uuids,
    mig_warnings,
    pool_memory_problem,
    sequential_pool_nodes,
    sequential_thread_pools,
    usable_gpus,
)

EFFECTIVE_BATCH = 8  # LLaMA-Factory's KT examples: batch 1 x gradient accumulation 8
LEGACY_CHUNK_SIZE = 8192  # LLaMA-Factory's legacy KT examples
# The legacy AMX SFT MoE (ktransformers v0.4.2 kt-sft operators/experts.py KSFTExpertsCPU) sizes its
# buffers for max(cuda_graphs) = chunk_size tokens and its forward takes the whole micro-batch (batch x padded
# length) at once: more tokens write past them (csrc/.../amx/sft_moe.hpp m_local_pos_[max_len]).
# generate_cuda_graphs asserts chunk_size <= 1024 or a multiple of 1024; LLaMA-Factory pads a training batch
# to a multiple of 8 (train/sft/workflow.py pad_to_multiple_of).
LEGACY_CHUNK_STEP = 1024
SFT_PAD_MULTIPLE = 8
MIN_CUTOFF_LEN = 64  # `ktinfra plan --cutoff-len` takes no less
KT_MAX_CACHE_DEPTH = 2  # kt_kernel.sft default and LLaMA-Factory's current KT examples
RULES_DIR = "examples/kt_optimize_rules"
# The model types whose MoE blocks kt-kernel 0.7.2's SFT wraps (kt_kernel/sft/arch.py get_moe_arch_config:
# DeepseekV2/V3/V4, KimiK2 by name or model_type, Qwen2Moe, Qwen3Moe, Qwen3VLMoe, Qwen3_5Moe, Glm4Moe,
# Mixtral; DeepseekV32ForCausalLM matches its "DeepseekV3"); any other stops the run with
# KTAMXModelNotSupportedError once the model loads.
CURRENT_SFT_MODEL_TYPES = frozenset(
    {
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "deepseek_v4",
        "kimi_k2",
        "kimi_k25",
        "kimi_k2_5",
        "kimi_k26",
        "kimi_k2_6",
        "qwen2_moe",
        "qwen3_moe",
        "qwen3_vl_moe",
        "qwen3_5_moe",
        "glm4_moe",
        "mixtral",
    }
)
ACCELERATE_BF16 = "examples/ktransformers/accelerate/fsdp2_kt_bf16.yaml"
# Chat templates of LLaMA-Factory's qwen3_vl mm_plugin: its collator appends a dummy image's tokens to the
# first sample of a text-only batch (data/collator.py), past cutoff_len, while llamafactory-kt sizes
# kt-kernel's token buffer (kt_model_max_length, its chunked_prefill_size) for cutoff_len x batch only:
# the first batch whose first sample is that long stops the run with "qlen (...) exceeds
# chunked_prefill_size" (sft/base.py). Upstream's qwen3_5moe example leaves them 128 tokens (2176 for 2048).
DUMMY_IMAGE_TEMPLATES = ("qwen3_vl", "qwen3_vl_nothink", "qwen3_5", "qwen3_5_nothink", "qwen3_6")
DUMMY_IMAGE_TOKENS = 128
# LLaMA-Factory chat templates per architecture (config.json model_type), as the KT examples pick them: the
# one render train writes when the plan names none. None for kimi_k2: its chat format
# (<|im_user|>user<|im_middle|>...) is not DeepSeek's, and the plan says "set `template` yourself"
TEMPLATES = {
    "current": {"qwen3_moe": "qwen3", "qwen3_5_moe": "qwen3_5", "qwen3_vl_moe": "qwen3_vl",
                "deepseek_v2": "deepseek", "deepseek_v3": "deepseek3"},
    "legacy": {"qwen3_moe": "qwen3_nothink", "deepseek_v2": "deepseek", "deepseek_v3": "deepseek"},
}  # fmt: skip
# The extra room costs kt-kernel 0.7.2 about 1-2 MB of RAM per token (operators/amx/sft_moe.hpp: per NUMA
# pool, the shared working pools hold max_len x experts_per_tok x ~(18 x moe_intermediate/pools + 16 x
# hidden) bytes, and with recompute one layer's cache pool at a time, freed after its backward): for
# Qwen3.5-397B-A17B (hidden 4096, moe_intermediate 1024, 10 experts per token, 2 pools) 128 tokens are about
# 0.25 GB per sample of the batch, beside ~800 GB of BF16 experts. Negligible: sizing does not add it.
# kt-kernel 0.7.2's native FP8 LoRA (kt_backend FP8 -> method AMXFP8_SFT; sft/config.py, sft/amx.py,
# sft/wrapper.py): frozen-base LoRA, every routed expert on the CPU, kt_share_backward_bb on, persistent
# weights, the checkpoint's weight_block_size [128, 128], hidden_size and moe_intermediate_size multiples of
# 128 (sizing.fp8_sft_shape_problem) and each NUMA pool's slice of moe_intermediate_size too. Its kernel
# (avx512-fp8-decode-bf16) is in the wheel's AMX and AVX512-BF16 builds, which an AMX CPU loads.
FP8_SFT_BLOCK = sizing.FP8_SFT_BLOCK
# The module each legacy placement rule puts in place of `model` (its `match: name: "^model$"` entry in
# LLaMA-Factory dc85995 examples/ktransformers/kt_optimize_rules/*-sft*.yaml), by rule-file prefix.
LEGACY_MODEL_CLASS = {"DeepSeek-": "KDeepseekV2Model", "Qwen3Moe-": "KQwen3MoeModel"}
# KDeepseekV2Model.forward starts with `self.gradient_checkpointing = False` (kvcache-ai/ktransformers
# archive/kt-sft/ktransformers/operators/models.py), so LLaMA-Factory's checkpointing never takes effect.
LEGACY_MODELS_WITHOUT_CHECKPOINTING = {"KDeepseekV2Model"}


def gradient_checkpointing(arch: Architecture, profile: dict) -> tuple[bool, str]:
    """(on, reason): LLaMA-Factory turns checkpointing on by default; the legacy DeepSeek model undoes it."""
    if profile["generation"] == "legacy":
        classes = {
            cls
            for rule in arch.legacy_sft_rules.values()
            for prefix, cls in LEGACY_MODEL_CLASS.items()
            if rule.startswith(prefix)
        }
        off = sorted(classes & LEGACY_MODELS_WITHOUT_CHECKPOINTING)
        if off:
            return False, (
                f"off: the legacy placement rules for {arch.name} swap in {off[0]}, whose forward turns "
                "gradient checkpointing off, so the GPU holds every layer's activations"
            )
    return True, "on (LLaMA-Factory's default): the GPU keeps one hidden state per layer and recomputes"


def padded_tokens(cutoff: int) -> int:
    """The most tokens one sample of cutoff_len can have once LLaMA-Factory pads the batch."""
    return -(-cutoff // SFT_PAD_MULTIPLE) * SFT_PAD_MULTIPLE


def legacy_chunk_size(cutoff: int) -> int:
    """The legacy examples' chunk_size, raised to a valid size holding one sample where that is longer."""
    need = -(-padded_tokens(cutoff) // LEGACY_CHUNK_STEP) * LEGACY_CHUNK_STEP
    return max(LEGACY_CHUNK_SIZE, need)


def choose_batch(
    arch: Architecture,
    gpus: int,
    gpu_bytes: int,
    cutoff: int | None,
    checkpointing: bool = True,
    max_tokens: int | None = None,
    room: int = 0,
) -> tuple[int, int, bool]:
    """(cutoff_len, per-device batch, fits): the longest cutoff, then the largest batch, that fit. With
    max_tokens (the legacy KT MoE's chunk_size), no batch holds more tokens than that; room: tokens a
    sample may have past cutoff_len (a dummy image's), sized on the GPU too."""
    cutoffs = [cutoff] if cutoff else [sizing.SFT_CUTOFF_LEN, 1024, 512]
    for length in cutoffs:
        for batch in (4, 2, 1):
            if batch > 1 and max_tokens and batch * padded_tokens(length) > max_tokens:
                continue
            est = sizing.sft(
                arch, cutoff_len=length + room, batch_size=batch, gradient_checkpointing=checkpointing
            )
            if per_gpu_need(est, gpus) <= gpu_bytes:
                return length, batch, True
    return cutoffs[0], 1, False


def per_gpu_need(est: sizing.Estimate, gpus: int) -> float:
    """One GPU's allocated peak plus its CUDA context and allocator cache."""
    return sizing.sft_per_gpu_bytes(est, gpus) + sizing.sft_gpu_runtime_bytes(est)


def _vram_problem(est: sizing.Estimate, gpus: list[dict], cutoff: int, gpu_bytes: int, room: int = 0) -> str:
    """Batch 1 does not fit: what each of the run's identical GPUs must hold, part by part."""
    share = sizing.sft_per_gpu_bytes(est, len(gpus))
    runtime = sizing.sft_gpu_runtime_bytes(est)
    peak = f"{gb(share)} allocated at peak"
    if len(gpus) > 1:
        sharded = gb(est.breakdown["gpu_weights"] + est.breakdown["lora_gpu_train_state"])
        peak += f" on each, the {sharded} of weights and LoRA state sharded over {len(gpus)} GPUs"
    need, have = gb_apart(share + runtime, gpu_bytes)
    return (
        f"needs {need} GPU memory per GPU at cutoff_len {cutoff}"
        + (f" + {room} dummy-image tokens" if room else "")
        + f", batch 1 ({peak}, + "
        f"{gb(runtime)} CUDA context and allocator cache), {gpu_names(gpus)} has {have}"
    )


def choose_gpus(gpus: list[dict]) -> tuple[list[dict], str]:
    """(data-parallel ranks of the run, why these): the identical GPUs holding the most memory together
    (ties: more GPUs) among those KT can use. FSDP sizes every rank like the smallest and steps at the
    slowest one's pace, so a mismatched GPU would only cut the batch; an old one would stop the run."""
    used = max(kt_capable_groups(gpus), key=lambda group: (len(group) * gpu_memory_bytes(group), len(group)))
    return used, left_out_reason(gpus, used, "data-parallel ranks")


def _legacy_rule_gpus(arch: Architecture, used: list[dict], reasons: dict) -> list[dict]:
    """The legacy launcher is one process whose kt_optimize_rule places the model on the GPUs it names
    (Qwen3Moe-sft-amx.yaml: all on "cuda"), so the run uses, and is sized on, only that many."""
    counts = [count for count in arch.legacy_sft_rules if count <= len(used)]
    if not counts or max(counts) == len(used):
        return used
    kept = used[: max(counts)]
    reasons["gpu_indices"] = (
        f"GPU {', '.join(str(g['index']) for g in kept)} of {len(used)}: the legacy placement rule for "
        f"{arch.name} places the model on {len(kept)} GPU(s) (one llamafactory-cli process)"
    )
    return kept


def fp8_refusal(arch: Architecture, profile: dict) -> str | None:
    """Why kt-kernel cannot train LoRA on this model's FP8 experts in place on this stack (None: it can)."""
    if arch.native_dtype == "fp8" and profile["generation"] == "legacy":
        return (
            f"the legacy stack {profile['name']} trains BF16 experts only (ktransformers 0.4 "
            "KSFTExpertsCPU); kt-kernel's FP8 LoRA (AMXFP8_SFT) is on the current stack (--stack kt-0.7)"
        )
    return sizing.fp8_sft_shape_problem(arch)


def expert_dtype(arch: Architecture, profile: dict, asked: object) -> str:
    """The routed experts' dtype the run trains on: `asked` (--expert-format bf16 | fp8, any case), else
    BF16 (seed 000's way; an FP8 checkpoint is cast to BF16 first). ValueError where kt-kernel cannot."""
    if asked is None:
        return "bf16"
    dtype = asked.strip().lower() if isinstance(asked, str) else None
    if dtype not in sizing.SFT_EXPERT_DTYPES:
        raise ValueError(
            f"--expert-format must be one of {', '.join(sizing.SFT_EXPERT_DTYPES)}, got {asked!r}"
        )
    refusal = fp8_refusal(arch, profile) if dtype == "fp8" else None
    if refusal:
        instead = "; leave it out to fine-tune from BF16 weights" if arch.native_dtype == "fp8" else ""
        raise ValueError(f"--expert-format fp8: {refusal}{instead}")
    return dtype


def _fp8_pool_problem(arch: Architecture, pools: int) -> list[str]:
    """kt-kernel splits each expert's intermediate rows over the NUMA pools; AMXFP8_SFT needs each slice a
    whole number of 128-row blocks."""
    inter = arch.moe_intermediate_size
    if inter % pools == 0 and (inter // pools) % FP8_SFT_BLOCK == 0:
        return []
    return [
        f"kt-kernel's FP8 LoRA (AMXFP8_SFT) splits moe_intermediate_size {inter} over the {pools} NUMA "
        f"thread pools into slices that must be multiples of {FP8_SFT_BLOCK}: plan BF16 experts (leave out "
        "--expert-format fp8) or run on a host with a pool count that divides it so"
    ]


def dummy_image_template(arch: Architecture) -> str | None:
    """The run's chat template where it is one that adds a dummy image to a text-only batch (None: not)."""
    template = arch.template or TEMPLATES["current"].get(arch.model_type)
    return template if template in DUMMY_IMAGE_TEMPLATES else None


def kt_model_max_length(cutoff: int, batch: int) -> int:
    """kt-kernel's token buffer for a dummy-image template: each sample's cutoff_len plus the image's
    tokens, padded to a multiple of 8 as the collator pads."""
    return batch * padded_tokens(cutoff + DUMMY_IMAGE_TOKENS)


def kt_keys(
    arch: Architecture,
    facts: dict,
    profile: dict,
    gpus: int,
    warnings: list,
    cutoff: int = sizing.SFT_CUTOFF_LEN,
    experts: str = "bf16",
    batch: int = 1,
    cpu_experts: float | None = None,
) -> tuple[dict, dict, str, list]:
    """(kt keys, launcher, reason, problems) for the profile's generation and the experts' dtype (fp8:
    current stack only); appends to `warnings`. `cpu_experts`: the experts' bytes in RAM, which the pools
    split evenly, each pool's slice in its own node's memory (as serving's, kt-kernel 0.7.2
    operators/moe-sft-tp.hpp: TP_MOE_SFT is moe-tp.hpp's TP_MOE, one intermediate slice per NUMA pool)."""
    # accelerate starts one process per GPU; rank 0 owns the KT backend (kt_kernel/sft/autograd.py) while the
    # others wait on their GPUs, busy as serving's tensor-parallel schedulers. Legacy: one process.
    ranks = 1 if profile["generation"] == "legacy" else max(gpus, 1)
    cores, threads_note = cpu_worker_threads(facts, ranks)
    if profile["generation"] == "legacy":
        rules = arch.legacy_sft_rules
        counts = sorted(c for c in rules if c <= max(gpus, 1))
        problems = (
            [] if counts else [f"no legacy kt_optimize_rule is known for {arch.name} ({arch.model_type})"]
        )
        rule = f"{RULES_DIR}/{rules[counts[-1]]}" if counts else None
        chunk = legacy_chunk_size(cutoff)
        keys = {"use_kt": True, "kt_optimize_rule": rule, "cpu_infer": cores, "chunk_size": chunk}
        launcher = {"kind": "llamafactory-cli", "env": {"USE_KT": "1"}, "command": "llamafactory-cli train"}
        chunk_note = (
            f"chunk_size {chunk}"
            if chunk == LEGACY_CHUNK_SIZE
            else f"chunk_size {chunk} (the examples' {LEGACY_CHUNK_SIZE} raised: the KT MoE takes a "
            f"whole micro-batch, here one sample of up to {padded_tokens(cutoff)} tokens, and holds "
            "chunk_size tokens)"
        )
        reason = (
            f"legacy KT keys (LLaMA-Factory <= 2025-12 examples): placement rule for {gpus} GPU(s), "
            f"{chunk_note}, cpu_infer = {cores} worker threads of "
            f"{facts['cpu']['physical_cores']} usable physical cores: {threads_note}"
        )
        return keys, launcher, reason, problems
    usable = cores
    fp8 = experts == "fp8"
    pools, cores, placement = sequential_thread_pools(facts, usable, share_bytes=cpu_experts)
    if placement:
        warnings.append(placement)
    on = sequential_pool_nodes(facts, pools)
    remedy = "fine-tune on a host whose nodes hold the share" + (
        ""
        if fp8 or arch.native_dtype != "fp8"
        else ", or train the FP8 experts in place (--expert-format fp8)"
    )
    short = pool_memory_problem(facts, on, cpu_experts, remedy)
    keys = {
        "use_kt": True,
        "kt_config": {
            "kt_backend": "FP8" if fp8 else "AMXBF16",  # AMXFP8 is its deprecated spelling
            "kt_expert_weight_format": experts,
            "kt_num_threads": cores,
            "kt_tp_enabled": pools > 1,
            "kt_threadpool_count": pools,
            "kt_max_cache_depth": KT_MAX_CACHE_DEPTH,
            "kt_share_backward_bb": True,
        },
    }
    template = dummy_image_template(arch)
    if template:
        keys["kt_config"]["kt_model_max_length"] = kt_model_max_length(cutoff, batch)
    launcher = {  # ktransformers doc/en/SFT/KTransformers-Fine-Tuning_User-Guide.md, "Run the command"
        "kind": "accelerate",
        "env": {"USE_KT": "1", "ACCELERATE_USE_KT": "true"},
        "accelerate_config": ACCELERATE_BF16,
        "num_processes": max(gpus, 1),
        "command": "accelerate launch --config_file <accelerate_config> -m llamafactory.cli train <yaml>",
    }
    nodes = ", ".join(map(str, on))
    method = (
        "FP8 (kt-kernel AMXFP8_SFT) on the checkpoint's block-FP8 experts, kt_share_backward_bb on as it "
        "requires"
        if fp8
        else "AMXBF16 on BF16 experts"
    )
    reason = (
        f"current KT keys (LLaMA-Factory examples/ktransformers, kt_kernel.sft.KTConfig): {method}, "
        f"{cores} threads in {pools} NUMA thread pool(s) on node(s) {nodes} (kt-kernel binds pool i "
        + (
            "to node i)"
            if on == list(range(pools))
            else "to hwloc's NUMA node i, which counts only the nodes this process may allocate on)"
        )
        + ", launched by accelerate with FSDP2"
        + (f"; {usable} usable cores cut to {cores} (see warnings)" if cores < usable else "")
        + (
            f"; kt_model_max_length {keys['kt_config']['kt_model_max_length']} = batch {batch} x "
            f"(cutoff_len {cutoff} + {DUMMY_IMAGE_TOKENS}, padded to {SFT_PAD_MULTIPLE}): chat template "
            f"{template} adds a dummy image's tokens to a text-only batch, past the cutoff_len x batch "
            "kt-kernel's token buffer holds by default"
            if template
            else ""
        )
    )
    return (
        keys,
        launcher,
        reason,
        (_fp8_pool_problem(arch, pools) if fp8 else []) + ([short] if short else []),
    )


def _checkpoint_reason(arch: Architecture, profile: dict, experts: str, est: sizing.Estimate, **batch) -> str:
    """Why the run reads the checkpoint it does; for BF16 from an FP8 model, what the FP8 path would save."""
    if experts == "fp8":
        return (
            f"{arch.name} ships fp8 and --expert-format fp8 asked for its experts as published: kt-kernel "
            f"trains LoRA on them in place (AMXFP8_SFT; {gb(est.breakdown['cpu_experts'])} of FP8 weights "
            "and 128x128 block scales in RAM) and LLaMA-Factory dequantizes the non-expert weights to BF16 "
            "on the GPU; no BF16 copy on disk"
        )
    reason = (
        f"{arch.name} ships {arch.native_dtype}; KT fine-tuning reads BF16 here (seed 000: DeepSeek's "
        "fp8_cast_bf16.py), so the disk estimate holds "
        + ("the BF16 copy beside the local checkpoint" if arch.path else "both checkpoints")
    )
    refusal = fp8_refusal(arch, profile)
    if refusal:
        return f"{reason}; {refusal}"
    fp8 = sizing.sft(arch, **batch, expert_dtype="fp8")
    return (
        f"{reason}; --expert-format fp8 trains the FP8 experts in place instead (kt-kernel AMXFP8_SFT): "
        f"{gb(est.ram_bytes - fp8.ram_bytes)} less RAM and no {gb(est.breakdown['bf16_conversion'])} "
        "BF16 copy on disk"
    )


def plan_sft(
    arch: Architecture, facts: dict, opts: dict, profile: dict, warnings: list
) -> tuple[dict, sizing.Estimate, dict, list]:
    """(sft section, estimate, reasons, problems); appends to `warnings`."""
    reasons: dict[str, str] = {}
    problems: list[str] = []
    cutoff_opt = opts.get("cutoff_len")
    if cutoff_opt is not None and (
        isinstance(cutoff_opt, bool) or not isinstance(cutoff_opt, int) or cutoff_opt < MIN_CUTOFF_LEN
    ):
        raise ValueError(f"cutoff_len must be an integer of at least {MIN_CUTOFF_LEN}, got {cutoff_opt!r}")
    if not has_amx(facts):
        lacking = ISA_UNKNOWN if amx_unknown(facts) else f"{facts['cpu'].get('model') or 'this CPU'} has none"
        problems.append(f"KT fine-tuning needs AMX (seed 000: `lscpu | grep -i amx`); {lacking}")
    if profile["generation"] != "legacy" and arch.model_type not in CURRENT_SFT_MODEL_TYPES:
        problems.append(
            f"KT fine-tuning (kt-kernel 0.7.2, kt_kernel/sft/arch.py) wraps no MoE block of "
            f"{arch.model_type}: the run would stop with KTAMXModelNotSupportedError once the model loaded; "
            "it supports DeepseekV2/V3/V4, Kimi-K2, Qwen2Moe, Qwen3Moe, Qwen3VLMoe, Qwen3_5Moe, Glm4Moe "
            "and Mixtral"
        )
    if arch.native_dtype == "int4":
        problems.append(
            f"KT fine-tuning reads BF16 experts; {arch.name} ships int4 (compressed-tensors) and ktinfra "
            "plans no int4 -> BF16 conversion: fine-tune a BF16 release of the model"
        )
    experts = expert_dtype(arch, profile, opts.get("expert_format"))
    used: list[dict] = []
    if usable_gpus(facts["gpus"]):  # none: gpu_problems says why (no GPU, or MIG without instances)
        used, reasons["gpu_indices"] = choose_gpus(facts["gpus"])
        warnings += mig_warnings(used, "data-parallel ranks", "sft.mig_uuids")
        if mig_uuids(used):
            reasons["mig_uuids"] = mig_reason(used)
    if profile["generation"] == "legacy":
        used = _legacy_rule_gpus(arch, used, reasons)
    gpus = len(used)
    checkpointing, reasons["gradient_checkpointing"] = gradient_checkpointing(arch, profile)
    # legacy: no micro-batch of more tokens than chunk_size (the examples' 8192 unless one sample is longer)
    max_tokens = (
        legacy_chunk_size(cutoff_opt or sizing.SFT_CUTOFF_LEN) if profile["generation"] == "legacy" else None
    )
    # a text-only batch of a dummy-image template is padded to its first sample, cutoff_len + the image
    room = DUMMY_IMAGE_TOKENS if profile["generation"] != "legacy" and dummy_image_template(arch) else 0
    # the experts' dtype changes RAM and disk only, so choose_batch sizes VRAM with the default
    if gpus:
        gpu_bytes = gpu_memory_bytes(used)
        cutoff, batch, fits = choose_batch(arch, gpus, gpu_bytes, cutoff_opt, checkpointing, max_tokens, room)
    else:
        cutoff, batch, fits, gpu_bytes = cutoff_opt or sizing.SFT_CUTOFF_LEN, 1, True, 0
    batch_args = {"cutoff_len": cutoff + room, "batch_size": batch, "gradient_checkpointing": checkpointing}
    est = sizing.sft(arch, **batch_args, expert_dtype=experts)
    if gpus and not fits:
        problems.append(_vram_problem(est, used, cutoff, gpu_bytes, room))
    reasons["cutoff_len"] = (
        f"{cutoff} tokens"
        + (" (set explicitly)" if cutoff_opt else "")
        + (
            ""
            if cutoff == sizing.SFT_CUTOFF_LEN or cutoff_opt
            else f", down from {sizing.SFT_CUTOFF_LEN} to fit VRAM"
        )
    )
    reasons["lora_rank"] = "rank 8, alpha 16 on all linear layers: LLaMA-Factory's KT examples"
    reasons["vram_bytes"] = (
        f"{gb(est.vram_bytes)} allocated at peak (every token of cutoff_len"
        + (f" + {room} dummy-image tokens" if room else "")
        + " a label; the model was within "
        "-4..+6 % of an H100 run at 512-2048 tokens, docs/results/2026-11-22-h100-sft-vram) + "
        f"{gb(sizing.sft_gpu_runtime_bytes(est))} per GPU of CUDA context and allocator cache"
    )
    keys, launcher, reasons["kt"], kt_problems = kt_keys(
        arch, facts, profile, gpus, warnings, cutoff, experts, batch, est.breakdown["cpu_experts"]
    )
    problems += kt_problems
    # each data-parallel rank (accelerate's processes) steps its own micro-batch; the legacy launcher is one
    ranks = launcher.get("num_processes", 1)
    accumulation = max(1, EFFECTIVE_BATCH // (batch * ranks))
    reasons["per_device_train_batch_size"] = (
        f"{batch} x {accumulation} gradient accumulation"
        + (f" x {ranks} data-parallel GPUs" if ranks > 1 else "")
        + f" = {batch * accumulation * ranks} samples per step; "
        + (
            f"no larger batch: {2 * batch} x {padded_tokens(cutoff)} tokens would pass chunk_size "
            f"{max_tokens}"
            if max_tokens and batch < 4 and 2 * batch * padded_tokens(cutoff) > max_tokens
            else "batch 1 because VRAM is tight"
            if batch == 1
            else "VRAM has room for a larger micro-batch"
        )
    )
    sft = {
        "lora_rank": sizing.SFT_LORA_RANK,
        "lora_alpha": 2 * sizing.SFT_LORA_RANK,
        "lora_target": "all",
        "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": accumulation,
        "cutoff_len": cutoff,
        "bf16": True,
        "learning_rate": 1.0e-4,
        "num_train_epochs": 3.0,
        "template": arch.template,
        "kt": keys,
        "launcher": launcher,
        "checkpoint_dtype": experts,
        "gpu_indices": [g["index"] for g in used],  # nvidia-smi's index; validate() requires it
        "mig_uuids": mig_uuids(used),  # CUDA_VISIBLE_DEVICES of a MIG-enabled GPU: its instance
    }
    if arch.native_dtype == "fp8":
        reasons["checkpoint_dtype"] = _checkpoint_reason(arch, profile, experts, est, **batch_args)
    if arch.template is None:
        reasons["template"] = (
            "no LLaMA-Factory chat template is known for this model: set `template` yourself"
        )
    return sft, est, reasons, problems
