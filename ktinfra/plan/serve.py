"""Serve decisions: SGLang + kt-kernel launch parameters for one model on one host."""

from __future__ import annotations

import math
import os
from pathlib import Path

from ktinfra import gguf_files, sizing
from ktinfra.architecture import Architecture
from ktinfra.plan import formats
from ktinfra.plan.host import (
    GB,
    MIB,
    compute_capability,
    cpu_worker_threads,
    gb,
    gb_apart,
    gpu_memory_bytes,
    gpu_names,
    hwloc_indices,
    kt_capable_groups,
    left_out_reason,
    mig_reason,
    mig_uuids,
    mig_warnings,
    most_memory_first,
    numa_ids_past_pools,
    numa_nodes_in_use,
    numa_nodes_of_usable_cpus,
    parse_cpulist,
    pool_memory_problem,
    sequential_pool_nodes,
    sequential_thread_pools,
    thread_pools,
    unknown_capability_warnings,
    usable_gpus,
)

DEFAULT_PORT = 30000  # SGLang's and `kt run`'s default
KV_TOKENS_PER_REQUEST = 4096  # KV room kept per concurrent request (prompt + answer of a chat turn)
GPU_RESERVE_FRACTION = 0.08  # of GPU memory left outside --mem-fraction-static ...
GPU_RESERVE_MIN = 1.5 * GB  # ... but at least this (CUDA context, activations of one prefill chunk)
GPU_RESERVE_MAX = 8.0 * GB  # ... and no more than seed 001's "5-8 GB is enough"
GPU_PREFILL_TOKEN_THRESHOLD = 2048  # kt-kernel README's example for the native backends
MAX_DEFERRED = 2  # kt-kernel README and seed 002
# At most this share of each layer's experts on the CPU, a converted CPU format's speed matters little beside
# the conversion it costs: the plan keeps it but says what the checkpoint's own format would need instead.
FEW_CPU_EXPERTS_SHARE = 1 / 16
# sglang-kt 0.7.2 server_args.py _validate_kt_expert_lora_max_running_requests
LORA_MIN_RUNNING_REQUESTS = 2
FP8_MIN_CC = (8, 9)  # FP8 tensor cores: Ada and Hopper

SERVE_KEYS = (
    "kt_method", "kt_weight_format", "kt_weight_path", "kt_cpuinfer", "kt_threadpool_count", "kt_numa_nodes",
    "kt_num_gpu_experts", "kt_max_deferred_experts_per_token", "kt_gpu_prefill_token_threshold",
    "mem_fraction_static", "chunked_prefill_size", "max_running_requests", "max_total_tokens",
    "context_length", "cuda_graph_max_bs", "tensor_parallel_size", "enable_mixed_chunk",
    "trust_remote_code", "host", "port", "served_model_name", "lora", "numa_cpus", "checkpoint_dtype",
    "gpu_indices", "mig_uuids", "max_mamba_cache_size",
)  # fmt: skip


def _ffn_widths(arch: Architecture) -> list[int]:
    """The MLP widths SGLang splits over the tensor-parallel ranks: an expert's, the shared experts', the
    dense layers'."""
    widths = [arch.moe_intermediate_size, arch.shared_intermediate_size]
    return [w for w in widths + [arch.dense_intermediate_size if arch.num_dense_layers else 0] if w]


def _fp8_block(arch: Architecture, dtype: str | None) -> int | None:
    """The scale-block rows each tensor-parallel rank must keep whole: only an fp8 checkpoint on the GPU."""
    return arch.fp8_block_n if dtype == "fp8" else None


def _kv_splits(arch: Architecture, tp: int) -> bool:
    """SGLang's QKVParallelLinear (layers/linear.py) splits the grouped KV heads over the ranks when tp is
    below their count and replicates each on tp / kv ranks at or above it; either way one divides the other
    (its divide() asserts it). MLA keeps no per-rank KV heads (its latent is replicated)."""
    kv = arch.num_kv_heads
    return arch.mla is not None or (tp % kv == 0 if tp >= kv else kv % tp == 0)


def _splits(arch: Architecture, tp: int, dtype: str | None, kv: bool = True) -> bool:
    """tp divides the attention heads and splits or replicates the KV heads evenly (_kv_splits) and, for a
    block-quantized fp8 checkpoint on the GPU, leaves each rank whole scale blocks: SGLang's Fp8 layers
    refuse "output_size ... is not divisible by weight quantization block_n" (Qwen3-235B-A22B-FP8: 1536 / 8
    = 192 rows, not a multiple of 128)."""
    if arch.num_attention_heads % tp or (kv and not _kv_splits(arch, tp)):
        return False
    block = _fp8_block(arch, dtype)
    return not block or all(w % tp == 0 and (w // tp) % block == 0 for w in _ffn_widths(arch))


def tensor_parallel(arch: Architecture, gpu_count: int, dtype: str | None = None, kv: bool = True) -> int:
    """Largest power of two <= the GPU count that divides the attention heads, splits the KV heads (`kv`)
    and the fp8 scale blocks."""
    tp = 1
    while tp * 2 <= gpu_count and _splits(arch, tp * 2, dtype, kv):
        tp *= 2
    return tp


def _tp_limit(arch: Architecture, dtype: str | None, gpu_count: int) -> str:
    block = _fp8_block(arch, dtype)
    heads = f"divides {arch.num_attention_heads} heads"
    if tensor_parallel(arch, gpu_count, dtype) < tensor_parallel(arch, gpu_count, dtype, kv=False):
        heads += f" and whose ranks split {arch.num_kv_heads} KV heads evenly, or copy each evenly"
    if not block:
        return heads
    widths = "/".join(str(w) for w in _ffn_widths(arch))
    return f"{heads} and leaves each rank whole {block}-row fp8 scale blocks of the {widths}-wide MLPs"


def mem_fraction_static(gpu_bytes: int) -> tuple[float, float]:
    """(fraction, bytes left for activations and CUDA graphs). A GPU no larger than the reserve (the plan
    is then infeasible: the reserve counts against it) gets 0.01, not a fraction of 0 or below."""
    reserve = min(max(GPU_RESERVE_FRACTION * gpu_bytes, GPU_RESERVE_MIN), GPU_RESERVE_MAX)
    return max(0.01, math.floor((1 - reserve / gpu_bytes) * 100 + 1e-6) / 100), reserve


def chunked_prefill(gpu_bytes: int) -> int:
    if gpu_bytes < 30 * GB:
        return 4096
    return 8192 if gpu_bytes < 100 * GB else 16384


def max_running(physical_cores: int) -> int:
    """CPU-bound decode: about two concurrent requests per physical core, a power of two in [4, 128]."""
    value = 4
    while value * 2 <= min(2 * physical_cores, 128):
        value *= 2
    return value


def _kt_run_effect(kt_run: int, cores: int, threads: int) -> str:
    """How `kt run`'s own thread count compares with this plan's."""
    if kt_run > cores:
        return "would oversubscribe the cores"
    if kt_run > threads:
        return f"would also take the {kt_run - threads} core(s) kept free"
    if kt_run < threads:
        return f"would leave {threads - kt_run} more core(s) idle"
    return "agrees"


def _cpu_decisions(
    facts: dict,
    serve: dict,
    reasons: dict,
    warnings: list,
    max_pools: int | None = None,
    ranks: int = 1,
    legacy: bool = False,
    width: int | None = None,
    share_bytes: float | None = None,
    problems: list | None = None,
) -> None:
    cpu = facts["cpu"]
    cores = cpu["physical_cores"]
    threads, note = cpu_worker_threads(facts, ranks)
    overrun = None
    if legacy:  # kt-kernel v0.4.4 binds pool i to node i, and the legacy sglang fork cannot name other nodes
        placement_of = sequential_thread_pools(facts, threads, max_pools, True, width, share_bytes)
        pools, placed, placement = placement_of
        on, nodes = sequential_pool_nodes(facts, pools), None
    else:
        pools, placed, placement, on = thread_pools(facts, threads, max_pools, width, share_bytes)
        nodes = hwloc_indices(facts, on)
        nodes = None if nodes == list(range(len(nodes))) else nodes
        overrun = numa_ids_past_pools(nodes, on)
    short = pool_memory_problem(facts, on, share_bytes)
    if short and problems is not None:
        problems.append(short)
    kt_run = int(cpu["logical_cpus"] * 0.8)
    effect = _kt_run_effect(kt_run, cores, placed)
    reasons["kt_cpuinfer"] = (
        f"{placed}: {cores} usable physical cores ({cpu['logical_cpus']} logical CPUs, "
        f"{cpu.get('threads_per_core') or 1} thread(s) per core), one thread per core, never "
        f"hyperthreads; {note}; `kt run`'s default 0.8 x logical = {kt_run} {effect}"
    )
    if placed < threads:
        sliced = "equal slice" in (placement or "")
        reasons["kt_cpuinfer"] += f"; {threads} cut to {placed} so every thread pool fits its NUMA node" + (
            " and takes an equal slice of the experts (see warnings)" if sliced else ""
        )
    on_nodes, with_memory = numa_nodes_of_usable_cpus(facts), numa_nodes_in_use(facts)
    allocatable = ""
    if with_memory < on_nodes:
        allocatable = f", {with_memory} of them with memory this process may allocate"
    reasons["kt_threadpool_count"] = (
        f"{pools}: the usable CPUs sit on {on_nodes} NUMA node(s){allocatable}; kt-kernel binds each pool "
        "to one node, keeping its expert weights in node-local memory"
    )
    default = "node 0" if pools == 1 else f"nodes 0-{pools - 1}"
    passed_over = ", ".join(str(i) for i in range(pools) if i not in (nodes or ()))
    reasons["kt_numa_nodes"] = (
        f"{' '.join(map(str, nodes))}: the pools' nodes, passed as --kt-numa-nodes because kt-kernel would "
        f"bind pool i to node i ({default}), and node(s) {passed_over} are not among the nodes chosen (the "
        "most usable cores among those whose memory holds a pool's share of the experts)"
        if nodes
        else "not set: the legacy stack's sglang fork has no --kt-numa-nodes; pool i is on node i"
        if legacy
        else "not set: pool i on node i (kt-kernel's default) is where the usable cores are"
    )
    if not legacy and (nodes or list(range(pools))) != on:
        reasons["kt_numa_nodes"] += (
            f" (the kernel's node(s) {' '.join(map(str, on))}: kt-kernel finds a pool's node by hwloc's "
            "logical index, which counts only the nodes with memory that this process may allocate on (its "
            "cpuset's mems), not by the kernel's node number)"
        )
    if not legacy and overrun:
        reasons["kt_numa_nodes"] += "; an id at or past the pool count trips kt-kernel 0.7.2 (see warnings)"
        warnings.append(overrun)
    if max_pools is not None and pools == max_pools < numa_nodes_in_use(facts):
        reasons["kt_threadpool_count"] += (
            f"; at most {max_pools}: LLAMAFILE gives each pool whole {formats.LLAMAFILE_BLOCK}-weight blocks "
            "of the expert width (kt-kernel 0.7.2 utils/llamafile.py:106 refuses a pool without one)"
        )
    if placement:
        reasons["kt_threadpool_count"] += " (placement limited: see warnings)"
        warnings.append(placement)
    reasons["numa_cpus"] = (
        "no numactl CPU pinning: the usable CPUs are already this process's cpuset, and kt-kernel binds "
        "each thread pool to its node itself"
    )
    serve.update({"kt_cpuinfer": placed, "kt_threadpool_count": pools, "kt_numa_nodes": nodes})


def mb(value: float) -> str:
    return f"{value / 1e6:.1f} MB"


def _state_pool_reason(arch, requests) -> str:
    slots = requests * sizing.STATE_SLOTS_PER_REQUEST
    return (
        f"{slots}: {sizing.STATE_SLOTS_PER_REQUEST} slots of {mb(sizing.state_bytes_per_slot(arch))} "
        f"linear-attention state ({arch.linear_attention.num_layers} layers) per running request, as SGLang "
        "admits max_mamba_cache_size // 3 requests with its radix cache on; left unset, SGLang would give "
        "0.9/1.9 of the memory after the weights to this pool and leave the KV cache about half the budget"
    )


def _state_part(est) -> str:
    state = est.breakdown.get("recurrent_state_min")
    return f" + {gb(state)} linear-attention state" if state else ""


def _expert_in_every_layer(arch: Architecture, dtype: str) -> float:
    """What one more kt_num_gpu_experts costs: one routed expert in each MoE layer."""
    return sizing.gpu_expert_bytes(arch, dtype) * arch.num_moe_layers


def _gpu_experts(arch, dtype, static, weights, kv_budget, held, lora, reasons) -> int:
    key = "kt_num_gpu_experts"
    if lora:
        reasons[key] = "0: a LoRA adapter is served; adapted experts all run in the kt-kernel"
        return 0
    expert_layer = _expert_in_every_layer(arch, dtype)
    spare = static - weights - kv_budget - held
    count = max(0, min(arch.num_experts, int(spare // expert_layer)))
    budget = "KV" if arch.linear_attention is None else "KV and linear-attention state"
    tower = f" ({gb(sizing.encoder_bytes(arch))} of them the vision encoder)" if arch.encoder_params else ""
    parts = (
        f"{gb(static)} static GPU memory - {gb(weights)} non-expert weights{tower} - {gb(kv_budget)} {budget}"
    )
    if held:
        parts += f" - {gb(held)} held for layerwise prefill"
    outcome = f"leaves {gb(spare)}" if spare >= 0 else f"is {gb(-spare)} short"
    reasons[key] = (
        f"{count} per MoE layer: {parts} {outcome}; one expert in all {arch.num_moe_layers} MoE layers is "
        f"{gb(expert_layer)} ({dtype})"
    )
    more = (count + 1) * expert_layer - max(spare, 0)
    if count == arch.num_experts:
        reasons[key] += "; every expert fits on the GPU, the CPU side stays idle"
    elif more <= kv_budget:
        reasons[key] += (
            f"; {count + 1} would cut {gb(more) if more >= 0.1 * GB else mb(more)} from the "
            f"{gb(kv_budget)} {budget} budget of max_running_requests x {KV_TOKENS_PER_REQUEST} tokens"
        )
    else:
        reasons[key] += (
            f"; {count + 1} would need {gb(more)} more, beyond the whole {gb(kv_budget)} {budget} budget"
        )
    return count


def _moe_layer(arch: Architecture, dtype: str) -> float:
    """One MoE layer's routed experts on the GPU: what a native backend's layerwise prefill loads."""
    return sizing.gpu_expert_bytes(arch, dtype) * arch.num_experts


def _running_requests(wanted, weights, layer, per_request, static, halve=True, least=1) -> tuple[int, float]:
    """(requests, prefill layer kept): halved (unless the user fixed them, and not below `least`) until their
    KV fits beside the weights and the layer; the layer is given up when the requests do not fit beside it."""
    if weights + layer + (least * per_request if halve else wanted * per_request) > static:
        layer = 0.0
    requests = wanted
    while halve and requests // 2 >= least and weights + layer + requests * per_request > static:
        requests //= 2
    return requests, layer


def _loader_pin_problem(facts: dict, tp: int) -> str | None:
    """Why sglang-kt's layerwise loader would kill the scheduler here, or None. sglang-kt 0.7.2 pins the
    loading thread of rank r to CPU os.cpu_count() - 1 - r (kt_ep_wrapper.py:1272-1275 and the bf16/fp8
    loaders), os.cpu_count() counting every online CPU, and does not catch the error: a CPU outside the
    cpuset fails the first long prefill with EINVAL. Facts without an online count are taken to hold no
    online CPU above the usable ones."""
    cpu = facts["cpu"]
    usable = parse_cpulist(cpu.get("usable_cpus"))
    online = cpu.get("online_cpus") or (max(usable) + 1 if usable else None)
    if not usable or not online:
        return None
    pinned = [online - 1 - rank for rank in range(tp)]
    outside = [c for c in pinned if c not in usable]
    if not outside:
        return None
    return (
        f"sglang-kt 0.7.2's layerwise loader pins rank r's thread to CPU os.cpu_count() - 1 - r "
        f"({', '.join(map(str, pinned))} of the {online} online CPUs) and does not catch the error: CPU(s) "
        f"{', '.join(map(str, outside))} lie outside the usable CPUs {cpu.get('usable_cpus')}, so the first "
        "long prefill would fail with EINVAL and stop the scheduler; CPU+GPU hybrid prefill only"
    )


def _prefill_threshold(fmt, arch, dtype, spare, lora, pin_problem, reasons) -> tuple[int | None, float]:
    """(threshold, bytes held for it): native backends prefill long prompts layer by layer on the GPU,
    needing one MoE layer of VRAM."""
    moe_layer = _moe_layer(arch, dtype)
    key = "kt_gpu_prefill_token_threshold"
    if not fmt.native_dtype:
        reasons[key] = f"only the native FP8/BF16/RAWINT4 backends use it, not {fmt.kt_method}"
    elif lora:
        reasons[key] = (
            "a LoRA adapter is served: the adapted experts run only in the kt-kernel, so long prompts "
            "prefill there too, not layer by layer on the GPU"
        )
    elif spare >= moe_layer * arch.num_moe_layers:
        reasons[key] = "every expert is on the GPU already: no layerwise prefill needed"
    elif pin_problem:
        reasons[key] = pin_problem
    elif spare < moe_layer:
        reasons[key] = "no VRAM for one more MoE layer: CPU+GPU hybrid prefill only"
    else:
        reasons[key] = (
            f"native {fmt.kt_method}: prompts over {GPU_PREFILL_TOKEN_THRESHOLD} tokens prefill layer by "
            f"layer on the GPU (one MoE layer, {gb(moe_layer)}, kept out of the KV pool by "
            "max_total_tokens); the loader pins its thread to the last online CPU(s), one per rank, and "
            "leaves the forward thread there (sglang-kt 0.7.2 never restores the affinity)"
        )
        return GPU_PREFILL_TOKEN_THRESHOLD, moe_layer
    return None, 0.0


def deferred_experts(experts_per_token: int, num_experts: int, gpu_experts: int) -> tuple[int, str]:
    """kt_max_deferred_experts_per_token for this expert placement, and why."""
    if gpu_experts == num_experts or experts_per_token <= MAX_DEFERRED:
        return 0, "0: nothing runs on the CPU, or too few routed experts per token to defer"
    deferred = min(MAX_DEFERRED, experts_per_token - 2)
    return deferred, (
        f"{deferred}: defer a few experts to overlap CPU and GPU, keeping at least 2 of the "
        f"{experts_per_token} routed experts immediate (KT slides, seed 003); kt-kernel README: 2"
    )


def _deferred(arch: Architecture, gpu_experts: int, reasons: dict) -> int:
    deferred, why = deferred_experts(arch.experts_per_token, arch.num_experts, gpu_experts)
    reasons["kt_max_deferred_experts_per_token"] = why
    return deferred


def port_problem(port: object) -> str | None:
    """Why a serve port is refused (None: it is fine): one rule for plan, render serve and the CLI."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        return f"port must be an integer 1-65535 (--port or plan serve.port), got {port!r}"
    return None


def _network(opts: dict, reasons: dict) -> dict:
    key_set = bool(opts.get("api_key_set"))
    host = opts.get("host") or ("0.0.0.0" if key_set else "127.0.0.1")
    why = "an API key is configured" if key_set else "no API key, so local clients only"
    reasons["host"] = f"{host}: " + ("set explicitly" if opts.get("host") else why)
    port, why = opts.get("port"), "set explicitly"
    if port is None:
        port, why = DEFAULT_PORT, "SGLang's default"
    elif problem := port_problem(port):
        from ktinfra.plan import PlanInputError

        raise PlanInputError(problem)
    reasons["port"] = f"{port}: {why}"
    return {"host": host, "port": port}


def choose_gpus(
    arch: Architecture, gpus: list[dict], dtype: str | None = None
) -> tuple[list[dict], str, str]:
    """(GPUs to serve on, why these, why this tensor-parallel size): tensor parallel over identical GPUs
    only, the group whose ranks hold the most memory (ties: the most GPUs), among the GPUs KT can use
    (compute capability >= 8.0 or unknown; all of them when none qualifies, which the plan reports)."""

    def usable(group: list[dict]) -> tuple[int, int]:
        tp = tensor_parallel(arch, len(group), dtype)
        return tp * gpu_memory_bytes(most_memory_first(group, tp)), tp

    group = max(kt_capable_groups(gpus), key=usable)
    used = most_memory_first(group, usable(group)[1])
    tp_why = (
        f"{len(group)} x {group[0].get('name')}; {len(used)} is the largest power of two <= {len(group)} "
        f"that {_tp_limit(arch, dtype, len(group))}"
    )
    heads = None
    if len(used) < len(group):
        heads = (
            f"the tensor-parallel size is the largest power of two <= {len(group)} that "
            f"{_tp_limit(arch, dtype, len(group))}: {len(used)}"
        )
    return used, left_out_reason(gpus, used, "tensor-parallel ranks", heads), tp_why


def _capability_warnings(arch, gpus, dtype, warnings) -> None:
    checks = "KT's minimum of 8.0 (bf16 tensor cores)"
    if dtype == "fp8":
        checks += " or the 8.9 the FP8 checkpoint needs for FP8 tensor cores"
    warnings += unknown_capability_warnings(gpus, checks)
    known = [cc for cc in map(compute_capability, gpus) if cc is not None]
    if dtype == "fp8" and known and min(known) < FP8_MIN_CC:
        warnings.append(
            f"{arch.name}'s FP8 checkpoint on compute capability < 8.9: no FP8 tensor cores, so SGLang runs "
            "slower fallback kernels; a BF16 checkpoint (--cpu-format BF16 or a converted model) avoids that"
        )


def _tensor_parallel_copies(arch: Architecture, tp: int, dtype: str, est) -> None:
    """GPU weights and the one-request KV minimum over all tensor-parallel ranks: sizing.serve counts one
    copy, SGLang keeps some of both whole on every rank."""
    kv = sizing.kv_bytes_per_token(arch, tp) * sizing.SERVE_MIN_KV_TOKENS
    weights = est.breakdown["gpu_weights"] + int(sizing.tp_extra_bytes(arch, tp, dtype))
    est.vram_bytes += kv - est.breakdown["kv_cache_min"] + weights - est.breakdown["gpu_weights"]
    est.breakdown.update(kv_cache_min=kv, gpu_weights=weights)


def _token_cap(arch: Architecture, tp: int, kv_space: float, requests: int, held: float, reasons) -> int:
    """--max-total-tokens: the KV space the plan leaves, over the bytes a token costs on all ranks."""
    per_token = sizing.kv_bytes_per_token(arch, tp)
    tokens = max(0, int(kv_space // per_token))
    copies = f", replicated on each of the {tp} ranks" if tp > 1 and arch.mla else ""
    layer = f" (the {gb(held)} MoE layer of layerwise prefill left out)" if held else ""
    reasons["max_total_tokens"] = (
        f"{tokens}: the {gb(kv_space)} this plan leaves for the KV cache{layer} at {per_token:,} bytes per "
        f"token{copies} ({tokens // max(requests, 1)} per running request); set because "
    )
    if arch.mla:
        m = arch.mla
        stored, profiled = m.kv_lora_rank + m.qk_rope_head_dim, m.qk_nope_head_dim + m.qk_rope_head_dim
        overcommit = sizing.kv_bytes_per_token(arch) / sizing.mla_profiled_bytes_per_token(arch)
        index = " (the DSA index keys counted in both)" if arch.indexer else ""
        reasons["max_total_tokens"] += (
            f"sglang-kt 0.7.2 sizes an MLA pool from qk_nope + qk_rope = {profiled} values per layer while "
            f"it stores kv_lora_rank + qk_rope = {stored}{index}, so unset it would claim {overcommit:.1f}x "
            "the memory it measured free (the cap holds any SGLang build, the legacy stack's included, to "
            "this budget)"
        )
    else:
        # model_runner_kv_cache_mixin.py:280-286; only MXFP4 reserves the layer (model_runner.py:593-607)
        reasons["max_total_tokens"] += (
            "unset, sglang-kt 0.7.2's KV pool takes all of mem_fraction_static after the weights and "
            "GPU experts, and the MoE layer of layerwise prefill, allocated at the first long prefill, "
            "would find no room"
        )
    return tokens


def busy_gpu_warnings(gpus: list[dict], frac: float) -> list[str]:
    """GPUs whose memory others already use beyond what mem_fraction_static leaves: SGLang takes that
    fraction of the whole GPU at start and fails there when it is not free. A MIG-enabled GPU reports the
    whole GPU's use, not its instance's: not judged."""
    warnings = []
    for gpu in gpus:
        used = gpu.get("memory_used_mib")
        if gpu.get("mig") or not used or used * MIB <= gpu["memory_mib"] * MIB * (1 - frac):
            continue
        warnings.append(
            f"GPU {gpu['index']} had {gb(used * MIB)} of {gb(gpu['memory_mib'] * MIB)} in use when the "
            f"facts were taken; the server takes mem_fraction_static {frac} of it at start and fails if that "
            "is not free: unless that was this plan's own server running already, stop what holds it, or "
            "lower mem_fraction_static (kt_serve_overrides)"
        )
    return warnings


def _gpu_decisions(arch, facts, fmt, est, dtype, opts, serve, reasons, problems, warnings) -> None:
    gpus, reasons["gpu_indices"], reasons["tensor_parallel_size"] = choose_gpus(arch, facts["gpus"], dtype)
    tp = len(gpus)
    warnings += mig_warnings(gpus, "tensor-parallel ranks", "serve.mig_uuids")
    serve["mig_uuids"] = mig_uuids(gpus)  # CUDA_VISIBLE_DEVICES of a MIG-enabled GPU: its instance
    if serve["mig_uuids"]:
        reasons["mig_uuids"] = mig_reason(gpus)
    gpu_bytes = gpu_memory_bytes(gpus)
    frac, reserve = mem_fraction_static(gpu_bytes)
    reasons["mem_fraction_static"] = (
        f"leaves {gb(gpu_bytes * (1 - frac))} of each {gb(gpu_bytes)} GPU for activations and CUDA graphs "
        "(seed 001: 5-8 GB on large GPUs; seed 002 ran 0.92 on a 24 GB RTX 4090)"
    )
    warnings += busy_gpu_warnings(gpus, frac)
    chunk = chunked_prefill(gpu_bytes)
    reasons["chunked_prefill_size"] = f"{chunk} tokens per prefill chunk on a {gb(gpu_bytes)} GPU"

    static = frac * gpu_bytes * tp
    _tensor_parallel_copies(arch, tp, dtype, est)
    weights = est.breakdown["gpu_weights"]
    state = sizing.state_bytes_per_request(arch)
    per_request = KV_TOKENS_PER_REQUEST * sizing.kv_bytes_per_token(arch, tp) + state
    lora = opts.get("lora")
    pin_problem = _loader_pin_problem(facts, tp)
    layerwise = fmt.native_dtype and not lora and not pin_problem
    layer = _moe_layer(arch, dtype) if layerwise else 0.0  # see _prefill_threshold
    cores = facts["cpu"]["physical_cores"]
    asked = opts.get("max_running_requests")
    wanted = asked or max_running(cores)
    least = LORA_MIN_RUNNING_REQUESTS if lora else 1
    requests, layer = _running_requests(wanted, weights, layer, per_request, static, not asked, least)
    kv_budget = requests * per_request
    each = f"{KV_TOKENS_PER_REQUEST} KV tokens"
    if state:
        each += f" and {sizing.STATE_SLOTS_PER_REQUEST} linear-attention state slots ({mb(state)})"
    if asked:
        reasons["max_running_requests"] = (
            f"{asked}: --max-running-requests (about 2 per core would give {max_running(cores)} on "
            f"{cores} cores), {each} each ({gb(kv_budget)})"
        )
        if lora and asked < LORA_MIN_RUNNING_REQUESTS:
            problems.append(
                f"--max-running-requests {asked}: sglang-kt serves LoRA with at least "
                f"{LORA_MIN_RUNNING_REQUESTS} (server_args.py: with 1 no request pool slot is allocatable)"
            )
        if weights + requests * per_request > static:
            fit = max(0, int((static - weights) // per_request))
            problems.append(
                f"--max-running-requests {asked} needs {gb(kv_budget)} of KV ({each} each) beside "
                f"{gb(weights)} of non-expert weights; {gb(static)} of static GPU memory holds at most "
                f"{fit} requests"
            )
    else:
        if lora and weights + requests * per_request > static:
            problems.append(
                f"sglang-kt serves LoRA with at least {requests} running requests: their KV ({each} each, "
                f"{gb(kv_budget)}) does not fit beside {gb(weights)} of non-expert weights in {gb(static)} "
                "of static GPU memory"
            )
        reasons["max_running_requests"] = (
            f"{requests}: decode is bound by {cores} CPU cores (about 2 requests per core; seed 002 served "
            f"12-14 users on 8), {each} each ({gb(kv_budget)}); each more request adds CPU expert reads "
            "to every decode step until a step reads them all: --max-running-requests trades per-request "
            "speed for throughput"
        )
    if requests < wanted:
        beside = f" and the {gb(layer)} MoE layer kept for layerwise prefill" if layer else ""
        reasons["max_running_requests"] += (
            f"; halved from {wanted} until they fit the {gb(static)} static GPU memory beside the "
            f"{gb(weights)} non-expert weights{beside}"
        )
    if state:
        serve["max_mamba_cache_size"] = requests * sizing.STATE_SLOTS_PER_REQUEST
        reasons["max_mamba_cache_size"] = _state_pool_reason(arch, requests)
    reasons["cuda_graph_max_bs"] = f"capture CUDA graphs only up to the {requests} running requests"
    est.breakdown["gpu_runtime_reserve"] = int(reserve * tp)  # not in vram_bytes; must fit beside it
    needed = est.vram_bytes + reserve * tp
    if needed > gpu_bytes * tp:
        need, have = gb_apart(needed, gpu_bytes * tp)
        problems.append(
            f"needs {need} GPU memory ({gb(weights)} weights + {gb(est.breakdown['kv_cache_min'])} KV "
            f"for one {sizing.SERVE_MIN_KV_TOKENS}-token request{_state_part(est)} + {gb(reserve * tp)} "
            f"runtime reserve), {gpu_names(gpus)} has {have}"
        )
    _capability_warnings(arch, gpus, dtype, warnings)
    spare = static - weights - kv_budget
    threshold, held = _prefill_threshold(fmt, arch, dtype, spare, lora, pin_problem, reasons)
    gpu_experts = _gpu_experts(arch, dtype, static, weights, kv_budget, held, lora, reasons)
    if gpu_experts == arch.num_experts and (fmt.converted or fmt.gguf):
        to_write = est.breakdown["cpu_weights_on_disk"]  # 0: already in --weight-path (_weight_path)
        unread = (
            f"the {gb(to_write)} of {fmt.weight_format} CPU weights would be "
            f"{'downloaded' if fmt.gguf else 'converted'} and never read"
            if to_write
            else f"the {fmt.weight_format} CPU weights in {serve['kt_weight_path']} "
            f"({gb(est.breakdown['cpu_experts'])} of experts) would never be read"
        )
        warnings.append(
            f"every expert fits on the GPU: kt-kernel runs none, so {unread}; "
            + (
                "the legacy stack's kt-kernel v0.4.4 loads them all the same (it has no native backend); "
                "the current stack reads the model's own weights in place"
                if opts.get("generation") == "legacy"
                else "a native --cpu-format (BF16/FP8, the model's own weights) needs none where this CPU "
                "runs it"
            )
        )
    if arch.mla or held:  # a pool SGLang would oversize, or one that would take the prefill layer's room
        experts = gpu_experts * _expert_in_every_layer(arch, dtype)
        kv_space = static - weights - experts - held - requests * state
        serve["max_total_tokens"] = _token_cap(arch, tp, kv_space, requests, held, reasons)
    serve.update(
        {
            "kt_num_gpu_experts": gpu_experts,
            "kt_max_deferred_experts_per_token": _deferred(arch, gpu_experts, reasons),
            "kt_gpu_prefill_token_threshold": threshold,
            "mem_fraction_static": frac,
            "chunked_prefill_size": chunk,
            "max_running_requests": requests,
            "cuda_graph_max_bs": requests,
            "tensor_parallel_size": tp,
            "gpu_indices": [g["index"] for g in gpus],  # nvidia-smi's index; validate() requires it
        }
    )


def _weight_path(
    path: str | None, fmt: sizing.CpuFormat, est: sizing.Estimate, reasons: dict, held, warnings: list
) -> str | None:
    """--weight-path: converted CPU weights already in a directory here (a model store) are not charged
    to the disk again; a directory not there yet is where the conversion (or the GGUF download) will write
    them. One this user may not read is planned as not there yet (it may be another host's path,
    test_weights_review2_gguf_unreadable), with a warning: a user who may read it would not see it charged."""
    if path is None:
        return None
    if held is None and os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(
            f"--weight-path {path} is a file: {fmt.weight_format} CPU weights are a directory, the one "
            "convert_cpu_weights.py writes (--output) and kt-kernel reads (--kt-weight-path)"
        )
    size = est.breakdown["cpu_weights_on_disk"]
    try:
        present = (Path(path).is_dir() and any(Path(path).iterdir())) or (
            held is not None and Path(path).is_file()
        )
    except OSError as exc:
        present = False
        warnings.append(
            f"--weight-path {path}: {exc.strerror or exc} for this user, so it is planned as not there yet "
            "(the weights' disk charged again); plan as a user who may read it, as the server's user must"
        )
    if present:
        est.breakdown["cpu_weights_on_disk"] = 0
        est.disk_bytes -= size
        reasons["kt_weight_path"] = (
            (
                f"the one folder of .gguf files in {held.given}, which kt-kernel reads only directly: "
                if held and held.given
                else ""
            )
            + f"{path} holds {gb(held.file_bytes)} of .gguf files: not counted again"
            if held
            else f"{path} holds the {fmt.weight_format} weights: {gb(size)} not counted again"
        )
    else:
        writer = "the GGUF download puts" if fmt.gguf else "the conversion writes"
        reasons["kt_weight_path"] = f"{path}: {writer} {gb(size)} of {fmt.weight_format} weights there"
    return path


def plan_serve(arch: Architecture, facts: dict, opts: dict, warnings: list) -> tuple:
    """(serve section, estimate, reasons, problems); appends to `warnings`. opts["gguf"]: the GGUF model
    --weight-path holds (ktinfra.plan.gguf_dir.HeldGguf), whose quant is the format and whose expert tensors
    are the RAM. Where the default converted format would leave kt-kernel no expert to run (every one fits
    on the GPU), the checkpoint's own format is planned instead: it needs no conversion (not on the legacy
    stack, opts["generation"], whose kt-kernel has no native backend)."""
    said: list[str] = []
    planned = _plan_serve(arch, facts, opts, said)
    serve, est = planned[0], planned[1]
    native = None if opts.get("generation") == "legacy" else formats.native_backend(arch, facts)
    chosen = opts.get("cpu_format") or opts.get("gguf")
    converts = est.breakdown["cpu_weights_on_disk"]
    if not chosen and native and converts and serve["kt_method"] != native.kt_method:
        said_native: list[str] = []
        alt = _plan_serve(arch, facts, {**opts, "cpu_format": native.name}, said_native)
        unread = gb(converts)
        in_place = _runs_no_expert(arch, serve) and _runs_no_expert(arch, alt[0]) and not alt[3]
        if in_place and formats.usable_native(arch, facts):
            alt[2]["kt_method"] = (
                f"every expert fits on the GPU ({arch.num_experts} per MoE layer), so kt-kernel runs none: "
                f"{native.kt_method} reads the {native.native_dtype} checkpoint in place instead of an "
                f"{serve['kt_method']} conversion of {unread} that would never be read"
            )
            planned, said = alt, said_native
        elif all(_runs_few_experts(arch, s) for s in (serve, alt[0])) and formats.ram_holds(facts, alt[1]):
            said.append(_native_in_place_hint(arch, native, serve, est, alt, unread))
    warnings += said
    return planned


def _cpu_experts(arch: Architecture, serve: dict) -> int:
    return arch.num_experts - (serve.get("kt_num_gpu_experts") or 0)


def _runs_few_experts(arch: Architecture, serve: dict) -> bool:
    """kt-kernel runs at most FEW_CPU_EXPERTS_SHARE of each MoE layer's experts (and at least one)."""
    return 0 < _cpu_experts(arch, serve) <= arch.num_experts * FEW_CPU_EXPERTS_SHARE


def _native_in_place_hint(arch: Architecture, native, serve: dict, est, alt: tuple, unread: str) -> str:
    """A converted format kept for a CPU that runs little: the in-place native plan's price, for the user."""
    alt_serve, alt_est, on_cpu = alt[0], alt[1], _cpu_experts(arch, serve)
    return (
        f"kt-kernel runs only {on_cpu} of {arch.num_experts} experts per MoE layer on the CPU: "
        f"--cpu-format {native.name} reads the {native.native_dtype} checkpoint in place "
        f"({alt_serve['kt_num_gpu_experts']} on the GPU, {gb(alt_est.ram_bytes)} RAM, "
        f"{gb(alt_est.disk_bytes)} disk) "
        f"instead of this {serve['kt_method']} conversion of {unread} ({gb(est.ram_bytes)} RAM, "
        f"{gb(est.disk_bytes)} disk)"
    )


def _runs_no_expert(arch: Architecture, serve: dict) -> bool:
    return serve.get("kt_num_gpu_experts") == arch.num_experts


def _plan_serve(arch: Architecture, facts: dict, opts: dict, warnings: list) -> tuple:
    reasons: dict[str, str] = {}
    held = opts.get("gguf")
    requested = held.fmt.name if held else opts.get("cpu_format")
    legacy = opts.get("generation") == "legacy"
    fmt, reasons["kt_method"], problems = formats.choose(arch, facts, requested, legacy)
    dtype = formats.checkpoint_dtype(arch, fmt)
    measured = held.expert_bytes(arch) if held else None
    est = sizing.serve(arch, fmt, checkpoint_dtype=dtype, cpu_expert_bytes=measured)
    reasons["kt_weight_format"] = f"{fmt.weight_format}: {gb(est.breakdown['cpu_experts'])} of experts in RAM"
    if held:
        reasons["kt_method"], reasons["kt_weight_format"] = held.reason(), held.files_reason(arch)
        warnings += held.warnings(arch)
    if fmt.gguf:
        types = (
            {t.type_name for t in held.expert_tensors(arch)}
            if held
            else gguf_files.mix_types(fmt.name.removeprefix("GGUF:"))
        )
        if rough := gguf_files.llamafile_imprecision(types):
            warnings.append(rough)
    weight_path = _weight_path(opts.get("weight_path"), fmt, est, reasons, held, warnings)
    serve: dict = dict.fromkeys(SERVE_KEYS)
    serve.update(
        {
            "kt_method": fmt.kt_method,
            "kt_weight_format": fmt.weight_format,
            "kt_weight_path": weight_path,
            "served_model_name": arch.name,
            "checkpoint_dtype": dtype,
            "enable_mixed_chunk": True,
            "trust_remote_code": True,
        }
    )
    reasons["enable_mixed_chunk"] = "mix prefill chunks into decode batches (seed 002's launch line)"
    variant, why = formats.forced_cpu_variant(facts, legacy, fmt.kt_method)
    if variant:  # present only where kt-kernel's own library choice would fault
        serve["kt_cpu_variant"], reasons["kt_cpu_variant"] = variant, why
    llamafile = fmt.kt_method == "LLAMAFILE"
    if llamafile and formats.llamafile_problem(arch):
        problems.append(formats.llamafile_problem(arch))
    max_pools = formats.llamafile_max_pools(arch) if llamafile else None
    # one scheduler process per tensor-parallel rank keeps a CPU busy: the worker threads leave it
    ranks = len(choose_gpus(arch, facts["gpus"], dtype)[0]) if usable_gpus(facts["gpus"]) else 1
    # each pool takes an equal slice of every expert's width (kt-kernel operators/moe-tp.hpp)
    _cpu_decisions(
        facts,
        serve,
        reasons,
        warnings,
        max_pools,
        ranks,
        legacy,
        arch.moe_intermediate_size,
        est.breakdown["cpu_experts"],
        problems,
    )
    serve.update(_network(opts, reasons))
    lora = opts.get("lora")
    if lora:
        serve["lora"] = {"paths": dict(lora), "max_loras_per_batch": 1, "backend": "triton"}
        reasons["lora"] = "adapters converted by sglang's convert_lora.py; one per batch, triton (seed 000)"
    if usable_gpus(facts["gpus"]):  # none: gpu_problems says why (no GPU, or MIG without instances)
        _gpu_decisions(arch, facts, fmt, est, dtype, opts, serve, reasons, problems, warnings)
    return serve, est, reasons, problems


def lora_problems(serve: dict, generation: str, warnings: list) -> list[str]:
    """The current stack's rules for a KT adapter (ktinfra.lora.check_kt_lora_serving), for adapters this
    host can read; appends a warning naming those it cannot."""
    from ktinfra.lora import carries_expert_lora, kt_lora_problems

    paths = (serve.get("lora") or {}).get("paths") or {}
    if not paths or generation == "legacy":
        return []
    kinds = {name: carries_expert_lora(Path(directory)) for name, directory in paths.items()}
    unread = [name for name, kind in kinds.items() if kind is None]
    if unread:
        warnings.append(
            f"adapter {', '.join(unread)} not readable here: whether it carries expert LoRA (served alone, "
            "on an SFT backend) is checked by `ktinfra lora serve`"
        )
    remedy = f"plan each of {', '.join(paths)} for its own instance"
    return kt_lora_problems(kinds, serve["kt_method"], remedy)
