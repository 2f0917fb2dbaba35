"""SGLang + kt-kernel server: the launch argv for a serve plan and the templated systemd unit around it.

Flag spellings follow kvcache-ai/sglang python/sglang/srt/server_args.py (see docs/readme/render.md).
"""

from __future__ import annotations

import copy
import ipaddress
import math
import re
from pathlib import Path

from ktinfra.facts.cpulist import parse_cpulist
from ktinfra.int8_weights import MANIFEST_NAME
from ktinfra.plan.formats import CPU_VARIANT_ENV, CPU_VARIANTS, LEGACY_CPU_VARIANTS
from ktinfra.plan.host import numa_ids_out_of_order, numa_ids_past_pools, past_pools_warning_head
from ktinfra.plan.serve import LORA_MIN_RUNNING_REQUESTS, port_problem
from ktinfra.render.common import (
    Rendered,
    RenderError,
    check_abs_path,
    check_env_dir,
    check_instance_name,
    check_program,
    check_secret,
    check_user,
    check_word,
    env_line,
    gpu_visibility,
    render_template,
    unit_literal,
)
from ktinfra.render.plans import (
    check_gpus_on_host,
    comment_text,
    host_section,
    model_section,
    optional_int,
    plan_section,
    require_fraction,
    require_int,
    require_str,
    shown,
)
from ktinfra.sizing import STATE_SLOTS_PER_REQUEST

DEFAULT_SERVE_PYTHON = "/opt/kt/envs/kt-kernel/bin/python"
ENV_DIR = "/etc/ktinfra/serve"
UNIT_TEMPLATE = "ktinfra-serve@.service"
CONVERT_DONE_MARKER = ".ktinfra-convert-done"  # what `render convert` leaves in a finished output
# kt-kernel backends that read converted CPU weights (convert_cpu_weights.py output or GGUF) from their own
# directory; the others (kt-kernel NativeMoEWrapper) read the model's own safetensors.
CONVERTED_WEIGHT_METHODS = frozenset({"AMXINT4", "AMXINT8", "LLAMAFILE", "MOE_INT4", "MOE_INT8"})
NATIVE_WEIGHT_METHODS = frozenset(
    {"BF16", "FP8", "FP8_PERCHANNEL", "RAWINT4", "GPTQ_INT4", "SYCL_GPTQ_INT4", "MXFP4", "NVFP4", "MXFP8"}
)
KT_METHODS = CONVERTED_WEIGHT_METHODS | NATIVE_WEIGHT_METHODS
LOOPBACK_NAMES = frozenset({"localhost"})
NUMA_POLICIES = ("auto", "interleave", "none")
NUMACTL = "/usr/bin/numactl"
# sglang server_args.py LORA_BACKEND_CHOICES (sglang-kt 0.7.2) but "ascend": its
# lora/backend/ascend_backend.py runs torch.ops.npu kernels (Ascend NPUs), a ktinfra server NVIDIA GPUs
LORA_BACKENDS = ("triton", "csgmv", "torch_native")
NPU_LORA_BACKENDS = ("ascend",)
START_LIMIT_BURST = 3
RESTART_S = 30
STOP_TIMEOUT_S = 120
MAX_START_TIMEOUT_S = 7 * 24 * 3600
PRIVILEGED_PORTS_END = 1024
# What the unit runs instead of `-m sglang.launch_server`: the same module, with --api-key taken from
# $KT_API_KEY inside the process, so the key never appears in /proc/PID/cmdline (ps) or a child's env.
# One word, --api-key=KEY: argparse would not take a key that starts with '-' as the next word's value.
LAUNCH_CODE = (
    'import os,runpy,sys;k=os.environ.pop("KT_API_KEY","");sys.argv[1:1]=["--api-key="+k] if k else [];'
    'runpy.run_module("sglang.launch_server",run_name="__main__",alter_sys=True)'
)

# sglang flags ktinfra sets or checks itself, and where to set each instead; --extra-arg may not carry them.
_PLAN_KEY_FLAGS = (
    "trust_remote_code", "mem_fraction_static", "chunked_prefill_size", "max_running_requests",
    "max_total_tokens", "context_length", "cuda_graph_max_bs", "schedule_conservativeness",
    "tensor_parallel_size", "enable_mixed_chunk", "max_mamba_cache_size",
)  # fmt: skip
OWNED_FLAGS = {
    **{"--" + key.replace("_", "-"): f"plan key serve.{key}" for key in _PLAN_KEY_FLAGS},
    "--tp-size": "plan key serve.tensor_parallel_size",
    "--host": "--host (or plan key serve.host)",
    "--port": "--port (or plan key serve.port)",
    "--model": "--model-path",
    "--model-path": "--model-path",
    "--served-model-name": "--name",
    "--api-key": "--api-key-file (a key in argv would show in ps)",
    "--admin-api-key": "--api-key-file (a key in argv would show in ps)",
    "--kt-weight-path": "--weight-path (or plan key serve.kt_weight_path)",
    "--enable-lora": "plan key serve.lora (or `ktinfra lora serve`)",
    "--lora-paths": "plan key serve.lora (or `ktinfra lora serve`)",
    "--max-loras-per-batch": "plan key serve.lora (or `ktinfra lora serve`)",
    "--lora-backend": "plan key serve.lora (or `ktinfra lora serve`)",
    "--config": "the plan (an sglang --config file can set any of the flags ktinfra checks)",
}


def _number(value: float) -> str:
    return format(float(value), "g")


def _port(serve: dict) -> int:
    port = serve.get("port")
    if problem := port_problem(port):
        raise RenderError(problem)
    return port


def _flag(serve: dict, key: str) -> bool:
    """A plan switch that defaults to on: "false" (a string) must not read as on."""
    value = serve.get(key, True)
    if not isinstance(value, bool):
        raise RenderError(f"plan serve.{key} must be true or false, got {value!r}")
    return value


def _optional_positive(serve: dict, key: str) -> float | None:
    value = serve.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise RenderError(f"plan serve.{key} must be a finite number > 0, got {value!r}")
    return float(value)


_CONVERTED_NAME = re.compile(r"(?i)(?:^|[-_.])(?:AMX)?(INT[48])$|gguf")
# kt-kernel's weight files are named after the kernel that wrote them (operators/amx/moe.hpp and
# operators/moe_kernel/moe.hpp: T::name() + "_up_" …): INT8_ for AMXINT8, INT4_ for AMXINT4, MOE_INT8_ and
# MOE_INT4_ for the general MOE_INT8/MOE_INT4 kernels (moe_kernel/la/kernel.hpp), in the same _layer_N/_numa_M
# folders; each kernel opens only its own names
_KT_FILE_KERNEL = re.compile(r"((?:MOE_)?INT[48])_(?:gate|up|down)_\d+_\d+Byte_(?:quant|scale)_\.kt")
# the name prefix of the .kt files each file-reading method opens
_METHOD_FILE_KERNEL = {"AMXINT8": "INT8", "AMXINT4": "INT4", "MOE_INT8": "MOE_INT8", "MOE_INT4": "MOE_INT4"}
# a merged convert_cpu_weights.py output's expert tensors (the script's default, both v0.4.4 and v0.7.0):
# blk.L.ffn_{up,gate,down}_exps.E.numa.M.{weight,scale}
_MERGED_TENSOR = re.compile(r"blk\.(\d+)\.ffn_(up|gate|down)_exps\.(\d+)\.numa\.(\d+)\.(weight|scale)")


def _lowest_layer(folder: Path) -> Path | None:
    layers = sorted(
        (int(child.name[7:]), child)
        for child in folder.iterdir()
        if re.fullmatch(r"_layer_\d+", child.name) and child.is_dir()
    )
    return layers[0][1] if layers else None


def _layer_kernel(layer: Path) -> str | None:
    """The kernel (INT8, INT4, MOE_INT8, MOE_INT4) that named the .kt files of the layer's first pool folder
    holding any; None without such files, or where that folder holds two kernels' files (either kernel's
    method may find all it reads: the answer must not hang on the folder's listing order)."""
    for part in sorted(layer.glob("_numa_*")):
        if part.is_dir():
            kernels = {
                match.group(1) for child in part.iterdir() if (match := _KT_FILE_KERNEL.fullmatch(child.name))
            }
            if kernels:
                return kernels.pop() if len(kernels) == 1 else None
    return None


def _merged_tensors(folder: Path) -> dict[tuple[str, ...], int]:
    """(layer, proj, expert, numa, weight|scale) -> values of each merged-tree expert tensor in the folder's
    .safetensors headers; empty for a model's own checkpoint."""
    from ktinfra.lora import LoraError, safetensors_header

    sizes: dict[tuple[str, ...], int] = {}
    for shard in sorted(folder.glob("*.safetensors")):
        try:
            header = safetensors_header(shard)
        except LoraError:
            continue
        for key, info in header.items():
            if match := _MERGED_TENSOR.fullmatch(key):
                sizes[match.groups()] = math.prod(info["shape"])
    return sizes


def _merged_pools(sizes: dict[tuple[str, ...], int]) -> set[int]:
    """The numa ids of a merged tree's expert weights."""
    return {int(numa) for (_, _, _, numa, kind) in sizes if kind == "weight"}


def _merged_kernel(sizes: dict[tuple[str, ...], int]) -> str | None:
    """INT8/INT4 for a merged tree whose first expert's shapes tell: per pool, up's scale holds one float per
    row of its share (the intermediate share I), down's one per hidden row (H), and down's weight H x I
    values of one byte (INT8) or half a byte (INT4; upstream v0.7.0 converter output, 2026-11-29 H200 run)."""
    for (layer, proj, expert, numa, kind), down_weight in sizes.items():
        up_scale = sizes.get((layer, "up", expert, numa, "scale"))
        down_scale = sizes.get((layer, "down", expert, numa, "scale"))
        if (proj, kind) == ("down", "weight") and up_scale and down_scale:
            return {1.0: "INT8", 0.5: "INT4"}.get(down_weight / (up_scale * down_scale))
    return None


def _weight_kind(path: str) -> tuple[str | None, str]:
    """What a weight directory holds and what told it: ("INT8"/"INT4", "files"/"name") for a converted AMX
    tree whose .kt files, merged tensor shapes or name say so, ("MOE_INT8"/"MOE_INT4", "files") for a tree of
    the general kernel's .kt files, ("converted" or "GGUF", "files") for other
    weights found here (a merged tree's blk.*.numa.* keys included), or (None, "") for the model's own or
    unknown."""
    folder = Path(path)
    try:
        if folder.is_dir():
            names = {child.name for child in folder.iterdir()}
            if any(name.lower().endswith(".gguf") for name in names):
                return "GGUF", "files"
            layer = _lowest_layer(folder)
            if layer is not None and (kernel := _layer_kernel(layer)):
                return kernel, "files"
            if names & {MANIFEST_NAME, CONVERT_DONE_MARKER} or layer is not None:
                return "converted", "files"
            if _merged_pools(sizes := _merged_tensors(folder)):
                return _merged_kernel(sizes) or "converted", "files"
    except OSError:
        pass
    match = _CONVERTED_NAME.search(folder.name)
    if match:
        return (match.group(1).upper() if match.group(1) else "GGUF"), "name"
    return None, ""


def _check_weight_format(method: str, path: str) -> None:
    """A plan's kt_method with another format's weights starts a server that fails while loading."""
    kind, told_by = _weight_kind(path)
    if kind is None:
        return
    wrong = (
        method in NATIVE_WEIGHT_METHODS
        or (method in ("AMXINT8", "AMXINT4") and kind in ("INT8", "INT4", "GGUF") and kind != method[3:])
        or (method == "LLAMAFILE" and kind != "GGUF")
        or (kind in ("MOE_INT8", "MOE_INT4") and kind != method)
        or (
            method in ("MOE_INT8", "MOE_INT4")
            and told_by == "files"
            and _kt_files_of_other_kernel(method, path)
        )
    )
    if wrong:
        what = {"GGUF": "GGUF weights", "converted": "converted CPU weights"}.get(kind, f"{kind} weights")
        raise RenderError(
            f"the plan's kt_method is {method}, but --weight-path {path} holds {what} (by its "
            f"{told_by}): plan with the "
            "--cpu-format those weights are in, or pass the weights this method reads"
            + (" (the model's own directory for a native method)" if method in NATIVE_WEIGHT_METHODS else "")
        )


def _kt_files_of_other_kernel(method: str, path: str) -> bool:
    """A _layer_N tree whose .kt files another kernel wrote than the one `method` opens (an AMX tree under a
    MOE_* method): a merged tree is not judged here, its keys do not name the kernel."""
    try:
        layer = _lowest_layer(Path(path))
        kernel = _layer_kernel(layer) if layer is not None else None
    except OSError:
        return False
    return kernel is not None and kernel != _METHOD_FILE_KERNEL[method]


def _tree_pools(folder: Path) -> int | None:
    """The NUMA pools a converted AMX tree on this machine is split over: the _numa_M folders of its lowest
    _layer_N that hold .kt files (--no-merge-safetensor), else the numa ids of a merged tree's keys; None
    when neither is here."""
    try:
        layer = _lowest_layer(folder)
        if layer is not None:  # the pools that hold weight files (.kt): an empty folder tells nothing
            parts = [p for p in layer.iterdir() if re.fullmatch(r"_numa_\d+", p.name) and p.is_dir()]
            return sum(1 for part in parts if any(f.suffix == ".kt" for f in part.iterdir())) or None
        ids = _merged_pools(_merged_tensors(folder))
        return max(ids) + 1 if ids else None
    except OSError:
        return None


def _check_weight_pools(serve: dict, method: str, path: str) -> None:
    """kt-kernel (v0.4.4 as 0.7.2) reads pool i's share of each expert from _layer_N/_numa_i, or the merged
    tree's numa.i keys, for the server's --kt-threadpool-count pools, with each file's size in its name
    (intermediate size / pools). A tree over other pools: kt-kernel 0.7.2 stops loading ("missing weight
    file", or "Path not found: …/_numa_1"; H200 run 2026-11-29) after the GPU part has loaded; v0.4.4's
    operators/amx/moe.hpp read_weights only prints "no such file" and serves experts it never loaded."""
    if method not in ("AMXINT8", "AMXINT4") or not Path(path).is_dir():
        return
    tree = _tree_pools(Path(path))
    pools = require_int(serve, "kt_threadpool_count", "serve", 1)
    if tree is not None and tree != pools:
        raise RenderError(
            f"--weight-path {path} is split over {tree} NUMA pool{'s' if tree != 1 else ''}, the plan's "
            f"serve.kt_threadpool_count is {pools}: kt-kernel loads a converted tree only with the pools it "
            f"was converted for (files missing are read as nothing); convert it again with "
            f"--threadpool-count {pools} (ktinfra render convert --plan), or plan {tree} pools"
        )


def _kt_weight_path(serve: dict, method: str, model_path: str, weight_path: str | None) -> str:
    path = weight_path or serve.get("kt_weight_path")
    if path:
        path = check_abs_path("weight path", path)
        if path != model_path:
            _check_weight_format(method, path)
            _check_weight_pools(serve, method, path)
        return path
    if method in NATIVE_WEIGHT_METHODS:
        return model_path
    raise RenderError(
        f"kt_method {method} reads converted CPU weights: pass --weight-path "
        "(the --output of `ktinfra render convert`, or the GGUF directory for LLAMAFILE)"
    )


def _lora_args(
    lora: object, gpu_experts: int, threshold: int | None, requests: int, tp_size: int
) -> list[str]:
    """sglang-kt 0.7.2 refuses KT LoRA beside GPU experts or the GPU prefill threshold (kt_ep_wrapper.py)
    and with fewer than 2 running requests (server_args.py). The adapters themselves: _check_lora_adapters."""
    if not lora:
        return []
    if not isinstance(lora, dict):
        raise RenderError(f"plan serve.lora must be an object or null, not {lora!r}")
    planned = "`ktinfra lora plan` and `ktinfra lora serve` plan it so"
    if gpu_experts != 0:
        raise RenderError(
            f"plan serve.lora is set but serve.kt_num_gpu_experts is {gpu_experts}: a LoRA plan keeps every "
            f"expert on the CPU (kt_num_gpu_experts 0; {planned})"
        )
    if threshold:
        raise RenderError(
            f"plan serve.lora is set but serve.kt_gpu_prefill_token_threshold is {threshold}: sglang-kt "
            f"refuses the GPU prefill threshold with KT LoRA (set it to null; {planned})"
        )
    if requests < LORA_MIN_RUNNING_REQUESTS:
        raise RenderError(
            f"plan serve.lora is set but serve.max_running_requests is {requests}: sglang-kt serves LoRA "
            f"with at least {LORA_MIN_RUNNING_REQUESTS} ({planned})"
        )
    backend = lora.get("backend")
    if backend is None:  # "", false or [] are not a request for the default
        backend = "triton"
    if backend in NPU_LORA_BACKENDS:
        raise RenderError(
            f"plan serve.lora.backend {backend!r} is SGLang's LoRA backend for Ascend NPUs (torch.ops.npu "
            f"kernels): the server runs on NVIDIA GPUs, use one of {', '.join(LORA_BACKENDS)}"
        )
    if backend not in LORA_BACKENDS:
        raise RenderError(f"plan serve.lora.backend {backend!r} is not one of {', '.join(LORA_BACKENDS)}")
    paths = lora.get("paths")
    if not isinstance(paths, dict) or not paths:
        raise RenderError("plan serve.lora.paths must map adapter names to directories")
    argv = ["--enable-lora", "--lora-paths"]
    for name, path in paths.items():
        check_instance_name("LoRA adapter name", name)
        argv.append(f"{name}={check_abs_path(f'LoRA adapter {name} path', path)}")
    argv += ["--max-loras-per-batch", str(require_int(lora, "max_loras_per_batch", "serve.lora", 1))]
    argv += ["--lora-backend", backend]
    return argv


def _check_lora_adapters(
    plan: dict,
    lora: dict,
    method: str,
    tp_size: int,
    converting: frozenset[str] = frozenset(),
    model_path: str | None = None,
) -> dict:
    """The checks `ktinfra lora plan` makes of each adapter readable here (lora.check_plan_adapters): what
    SGLang reads of it, and its backend and tensor parallel. `converting`: adapters `lora serve` converts
    into their path after rendering; what lies there now is the output --overwrite replaces, not what is
    served (serve checks the training output, and convert() the new output). Returns the adapters served
    from a copy without added_tokens.json, as `lora plan` plans them (against the tokenizer of `model_path`,
    the served model, where readable here): name -> lora.ServedCopy."""
    # imported here: ktinfra.lora imports this module
    from ktinfra.lora import LoraError, check_plan_adapters

    legacy = plan.get("stack_generation") == "legacy"
    paths = {name: path for name, path in lora["paths"].items() if name not in converting}
    try:
        return check_plan_adapters(
            paths,
            lora.get("backend") or "triton",
            tp_size,
            method,
            legacy,
            served_base=model_path,
            copies=True,
        )
    except LoraError as exc:
        raise RenderError(f"plan {exc}") from None


def _state_pool_args(serve: dict, requests: int) -> list[str]:
    """--max-mamba-cache-size for hybrid models: SGLang admits at most a third of the slots as running
    requests (radix cache on), so fewer than 3 per request would silently cap max_running_requests."""
    slots = optional_int(serve, "max_mamba_cache_size", "serve", 1)
    if slots is None:
        return []
    if slots < STATE_SLOTS_PER_REQUEST * requests:
        raise RenderError(
            f"plan serve.max_mamba_cache_size {slots} admits only {slots // STATE_SLOTS_PER_REQUEST} running "
            f"requests (SGLang keeps {STATE_SLOTS_PER_REQUEST} state slots per request), fewer than "
            f"max_running_requests {requests}: raise it to {STATE_SLOTS_PER_REQUEST * requests} (GPU memory "
            "for the linear-attention state) or lower max_running_requests"
        )
    return ["--max-mamba-cache-size", str(slots)]


def sglang_argv(
    plan: dict,
    *,
    model_path: str,
    weight_path: str | None,
    python: str = "python3",
    converting: frozenset[str] = frozenset(),
) -> list[str]:
    """The full `python -m sglang.launch_server ...` argv for a serve plan (the API key travels by env);
    `converting`: see _check_lora_adapters."""
    return _sglang_argv(plan, model_path, weight_path, python, converting)[0]


def _sglang_argv(
    plan: dict, model_path: str, weight_path: str | None, python: str, converting: frozenset[str]
) -> tuple[list[str], dict]:
    """sglang_argv, and the adapters it serves from a copy without added_tokens.json (_check_lora_adapters),
    each under its copy's path in --lora-paths."""
    serve = plan_section(plan, "serve")
    model_path = check_abs_path("model path", model_path)
    method = require_str(serve, "kt_method", "serve")
    if method not in KT_METHODS:
        raise RenderError(
            f"plan serve.kt_method {method!r} is not a kt-kernel method ({', '.join(sorted(KT_METHODS))})"
        )
    served_name = serve.get("served_model_name") or model_section(plan).get("name")
    argv = [check_word("python", python), "-m", "sglang.launch_server"]
    argv += ["--host", check_host("serve.host", require_str(serve, "host", "serve"))]
    argv += ["--port", str(_port(serve))]
    argv += ["--model", model_path]
    if _flag(serve, "trust_remote_code"):
        argv.append("--trust-remote-code")
    argv += ["--mem-fraction-static", _number(require_fraction(serve, "mem_fraction_static", "serve"))]
    argv += ["--chunked-prefill-size", str(require_int(serve, "chunked_prefill_size", "serve", 1))]
    requests = require_int(serve, "max_running_requests", "serve", 1)
    argv += ["--max-running-requests", str(requests)]
    argv += _state_pool_args(serve, requests)
    for key, flag in (
        ("max_total_tokens", "--max-total-tokens"),
        ("context_length", "--context-length"),
        ("cuda_graph_max_bs", "--cuda-graph-max-bs"),
    ):
        value = optional_int(serve, key, "serve", 1)
        if value is not None:
            argv += [flag, str(value)]
    conservativeness = _optional_positive(serve, "schedule_conservativeness")
    if conservativeness is not None:
        argv += ["--schedule-conservativeness", _number(conservativeness)]
    tp_size = require_int(serve, "tensor_parallel_size", "serve", 1)
    gpus = gpu_visibility(
        serve.get("gpu_indices"), "serve.gpu_indices", serve.get("mig_uuids"), "serve.mig_uuids"
    )
    check_gpus_on_host(plan, serve.get("gpu_indices"), "serve.gpu_indices")
    if gpus and len(serve["gpu_indices"]) != tp_size:
        raise RenderError(
            f"plan serve.tensor_parallel_size {tp_size} does not match serve.gpu_indices "
            f"{serve['gpu_indices']!r}: the server runs one tensor-parallel rank per listed GPU"
        )
    argv += ["--tensor-parallel-size", str(tp_size)]
    if served_name:
        argv += ["--served-model-name", check_word("served model name", served_name)]
    if _flag(serve, "enable_mixed_chunk"):
        argv.append("--enable-mixed-chunk")
    argv += ["--kt-method", method]
    argv += ["--kt-weight-path", _kt_weight_path(serve, method, model_path, weight_path)]
    cpuinfer = require_int(serve, "kt_cpuinfer", "serve", 1)
    argv += ["--kt-cpuinfer", str(cpuinfer)]
    pools = require_int(serve, "kt_threadpool_count", "serve", 1)
    if pools > cpuinfer:
        raise RenderError(
            f"plan serve.kt_threadpool_count {pools} exceeds serve.kt_cpuinfer {cpuinfer}: "
            "each thread pool needs at least one CPU inference thread"
        )
    argv += ["--kt-threadpool-count", str(pools)]
    argv += _numa_nodes_args(serve.get("kt_numa_nodes"), pools)
    _check_legacy_stack(plan)
    gpu_experts = require_int(serve, "kt_num_gpu_experts", "serve", 0)
    _check_gpu_experts(gpu_experts, model_section(plan).get("num_experts"))
    argv += ["--kt-num-gpu-experts", str(gpu_experts)]
    deferred = require_int(serve, "kt_max_deferred_experts_per_token", "serve", 0)
    argv += ["--kt-max-deferred-experts-per-token", str(deferred)]
    threshold = optional_int(serve, "kt_gpu_prefill_token_threshold", "serve", 0)
    if threshold is not None:
        argv += ["--kt-gpu-prefill-token-threshold", str(threshold)]
    lora_argv = _lora_args(serve.get("lora"), gpu_experts, threshold, requests, tp_size)
    copies = (
        _check_lora_adapters(plan, serve["lora"], method, tp_size, converting, model_path)
        if lora_argv
        else {}
    )
    if copies:
        from ktinfra.lora import served_paths  # imported here: ktinfra.lora imports this module

        lora = {**serve["lora"], "paths": served_paths(serve["lora"]["paths"], copies)}
        lora_argv = _lora_args(lora, gpu_experts, threshold, requests, tp_size)
    return argv + lora_argv, copies


def _check_legacy_stack(plan: dict) -> None:
    """A legacy-stack plan asks only for flags its sglang fork takes: one with kt_numa_nodes rendered a unit
    whose server stopped at its argument check ("unrecognized arguments: --kt-numa-nodes"), three times over.
    (Its kt_method: the planner keeps it in plan.formats.LEGACY_KT_METHODS; kt_serve checks it too.)"""
    if plan.get("stack_generation") != "legacy":
        return
    nodes = plan["serve"].get("kt_numa_nodes")
    if nodes is not None:
        raise RenderError(
            f"plan serve.kt_numa_nodes is {shown(nodes)}, but the legacy stack "
            f"{comment_text(plan, 'stack', 'stack')}'s sglang fork has no --kt-numa-nodes (its argument "
            "parser would stop the server) and its kt-kernel v0.4.4 binds thread pool i to NUMA node i: "
            "serve where this process's usable cores include NUMA nodes 0 to kt_threadpool_count - 1, or on "
            "the current stack"
        )


def _check_gpu_experts(gpu_experts: int, num_experts: object) -> None:
    """kt-kernel places the first kt_num_gpu_experts experts of each layer on the GPU; more than the model
    has is a hand-edited or foreign plan, not a request for the whole model on the GPU."""
    if isinstance(num_experts, bool) or not isinstance(num_experts, int) or num_experts < 1:
        return
    if gpu_experts > num_experts:
        raise RenderError(
            f"plan serve.kt_num_gpu_experts {gpu_experts} exceeds model.num_experts {num_experts}: "
            f"at most {num_experts} (every routed expert on the GPU)"
        )


def _numa_nodes_args(nodes: object, pools: int) -> list[str]:
    """--kt-numa-nodes: one NUMA node per thread pool, where they are not kt-kernel's default 0..n-1."""
    if nodes is None:
        return []
    if (
        not isinstance(nodes, list)
        or len(nodes) != pools
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in nodes)
    ):
        raise RenderError(
            f"plan serve.kt_numa_nodes must list one NUMA node id per thread pool ({pools}), not {nodes!r}"
        )
    return ["--kt-numa-nodes", *map(str, nodes)]


def numa_warnings(plan: dict) -> list[str]:
    """What a plan's (checked) kt_numa_nodes costs kt-kernel 0.7.2, as the planner words it. A list out of
    hwloc's order comes only from a plan file set by hand (the planner's are ascending), so the planner
    never warned of it; the plan holds no hwloc order, so its ids are named as hwloc indices."""
    serve = plan["serve"]
    ids = serve.get("kt_numa_nodes")
    if not ids:
        return []
    pools = serve["kt_threadpool_count"]
    if max(ids) >= pools:
        return [_numa_ids_past_pools(plan, ids)]
    warning = numa_ids_out_of_order(ids)
    return [warning] if warning else []


def _numa_ids_past_pools(plan: dict, ids: list[int]) -> str:
    """The planner's own warning where the plan made this list (it names the kernel's nodes from the host's
    facts), else the same defect without them."""
    planned = plan.get("warnings")
    for warning in planned if isinstance(planned, list) else ():
        if isinstance(warning, str) and warning.startswith(past_pools_warning_head(ids)):
            return warning
    return numa_ids_past_pools(ids)


def _flag_owner(flag: str) -> str | None:
    """Where to set `flag` instead of --extra-arg, or None when ktinfra leaves it alone. sglang's argparse
    takes any unambiguous prefix of a flag (allow_abbrev), so a prefix of an owned flag is owned too."""
    if len(flag) <= 2:
        return None
    if flag.startswith("--kt-") or "--kt-".startswith(flag):
        if len(flag) > len("--kt-") and "--kt-weight-path".startswith(flag):
            return OWNED_FLAGS["--kt-weight-path"]
        return "the plan's serve.kt_* keys"
    if (
        flag.startswith("--lora-") and flag not in OWNED_FLAGS
    ):  # e.g. --lora-target-modules, --lora-eviction-policy
        return f"{OWNED_FLAGS['--lora-paths']}: it renders every --lora-* flag from serve.lora"
    if flag in OWNED_FLAGS:
        return OWNED_FLAGS[flag]
    matches = sorted(owned for owned in OWNED_FLAGS if owned.startswith(flag))
    return f"{OWNED_FLAGS[matches[0]]} (sglang reads {flag} as {matches[0]})" if matches else None


def _check_extra_arg(arg: str) -> str:
    arg = check_word("--extra-arg", arg)
    flag = arg.split("=", 1)[0]
    # argparse's help: the server prints it and exits 0, a clean stop Restart=on-failure never retries
    if flag == "-h" or (flag.startswith("--he") and "--help".startswith(flag)):
        raise RenderError(f"--extra-arg {flag}: the server would print its help and exit instead of serving")
    if not arg.startswith("--"):
        return arg
    owner = _flag_owner(flag)
    if owner:
        raise RenderError(f"--extra-arg {flag}: ktinfra sets or checks this flag itself; use {owner}")
    return arg


_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*\.?")


def check_host(what: str, host: str) -> str:
    """A bind address SGLang's --host takes: an IP address (IPv6 without brackets) or a host name. "--help"
    would be read as a flag by the server's argparse."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if _HOST_NAME.fullmatch(host):
        return host
    hint = " (write an IPv6 address without brackets)" if host.startswith("[") else ""
    raise RenderError(f"{what} {host!r} is not an IP address or a host name{hint}")


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def health_url(host: str, port: int) -> str:
    """Where a local client reaches /health (a wildcard bind is reached over loopback)."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/health"


def numactl_args(plan: dict, policy: str = "auto") -> tuple[list[str], str]:
    """NUMA placement of the whole server process, and why.

    kt-kernel already places the expert weights per NUMA node (one threadpool per node), so numactl only
    adds CPU pinning when the plan asks for it (sched_setaffinity: works in containers too) and, on a
    multi-node host known not to be a container, interleaves the rest of the process's memory. Memory
    policies need CAP_SYS_NICE under docker's default seccomp profile, so they are not used where the
    plan does not say host.container is false.
    """
    if policy not in NUMA_POLICIES:
        raise RenderError(f"--numa {policy!r} is not one of {', '.join(NUMA_POLICIES)}")
    serve = plan["serve"]
    host = host_section(plan)
    cpus = serve.get("numa_cpus")
    # a CPU list such as "0-13" (the facts' cpulist format); True, "banana" or 0 (CPU 0, dropped as false)
    # reached numactl, which fails the start
    if cpus is not None and (not isinstance(cpus, str) or parse_cpulist(cpus) is None):
        raise RenderError(
            f'plan serve.numa_cpus must be a CPU list such as "0-13" or null, got {shown(cpus)}'
        )
    nodes = max(
        optional_int(host, "numa_nodes", "host", 0) or 1,  # 0 or null: unknown, as one node
        optional_int(serve, "kt_threadpool_count", "serve", 1) or 1,
    )
    if policy == "none":
        return [], "--numa none: no placement"
    if cpus:
        pin = [f"--physcpubind={check_word('serve.numa_cpus', cpus)}"]
        if policy == "interleave":
            return pin + ["--interleave=all"], f"plan pins the server to CPUs {cpus}; --numa interleave"
        return pin, f"plan pins the server to CPUs {cpus}"
    if policy == "interleave" or (nodes > 1 and host.get("container") is False):
        return ["--interleave=all"], f"{nodes} NUMA nodes: interleave the non-expert memory"
    if nodes > 1:
        return [], "several NUMA nodes but possibly a container (memory policy needs CAP_SYS_NICE)"
    return [], "one NUMA node: nothing to place"


def _restart_policy(start_timeout_s: int) -> dict[str, int]:
    """The unit's start/restart timings; the start-limit window spans START_LIMIT_BURST whole failed
    starts (each: load until TimeoutStartSec, stop, RestartSec), however late in loading they fail."""
    if isinstance(start_timeout_s, bool) or not isinstance(start_timeout_s, int):
        raise RenderError(f"--start-timeout must be a whole number of seconds, got {start_timeout_s!r}")
    if not 1 <= start_timeout_s <= MAX_START_TIMEOUT_S:
        raise RenderError(
            f"--start-timeout must be 1-{MAX_START_TIMEOUT_S} seconds, got {start_timeout_s} "
            "(systemd ignores negative values and treats 0 as no timeout)"
        )
    cycle = start_timeout_s + STOP_TIMEOUT_S + RESTART_S
    return {
        "start_timeout_s": start_timeout_s,
        "stop_timeout_s": STOP_TIMEOUT_S,
        "restart_s": RESTART_S,
        "start_limit_burst": START_LIMIT_BURST,
        "start_limit_interval_s": START_LIMIT_BURST * cycle,
    }


def _check_user_can_bind(user: str | None, port: int) -> None:
    """The unit template is shared by every instance, so it cannot grant CAP_NET_BIND_SERVICE to one port's
    instance only: a non-root User= with a port below 1024 is refused instead of failing at bind."""
    if user is not None and user not in ("root", "0") and port < PRIVILEGED_PORTS_END:
        raise RenderError(
            f"--user {user} cannot bind port {port}: ports below {PRIVILEGED_PORTS_END} need root; serve on "
            f"{PRIVILEGED_PORTS_END} or above and put kt_router or a reverse proxy on port {port}"
        )


def _with_overrides(plan: dict, name: str, host: str | None, port: int | None) -> dict:
    plan = copy.deepcopy(plan)
    serve = plan_section(plan, "serve")
    serve["served_model_name"] = name
    if host is not None:
        serve["host"] = host
    if port is not None:
        serve["port"] = port
    return plan


def render_serve(
    plan: dict,
    *,
    name: str,
    model_path: str,
    weight_path: str | None = None,
    python: str = DEFAULT_SERVE_PYTHON,
    api_key: str | None = None,
    host: str | None = None,
    port: int | None = None,
    extra_args: tuple[str, ...] | list[str] = (),
    user: str | None = None,
    start_timeout_s: int = 3600,
    numa: str = "auto",
    env_dir: str = ENV_DIR,
    converting: frozenset[str] = frozenset(),
) -> Rendered:
    name = check_instance_name("--name", name)
    env_dir = check_env_dir(env_dir)
    python = check_program("--python", python)
    user = check_user(user)
    plan = _with_overrides(plan, name, host, port)
    argv, copies = _sglang_argv(plan, model_path, weight_path, python, converting)
    serve = plan["serve"]
    _check_user_can_bind(user, serve["port"])
    if api_key is not None:
        api_key = check_secret("API key", api_key.strip())
    if not is_loopback(serve["host"]) and not api_key:
        raise RenderError(
            f"refusing to bind the server to {serve['host']} without an API key: "
            "pass --api-key-file, or keep the default 127.0.0.1"
        )
    extra = [_check_extra_arg(arg) for arg in extra_args]
    url = health_url(serve["host"], serve["port"])
    placement, placement_reason = numactl_args(plan, numa)
    out = Rendered()
    out.add(
        UNIT_TEMPLATE,
        render_template(
            "systemd/ktinfra-serve@.service.j2",
            python=unit_literal(python),
            numactl=unit_literal(NUMACTL),
            launch_code=unit_literal(LAUNCH_CODE),
            env_dir=unit_literal(env_dir),
            user=user and unit_literal(user),
            **_restart_policy(start_timeout_s),
        ),
    )
    env = [
        f"# ktinfra serve instance {name}: model {comment_text(model_section(plan), 'name', 'model.name')}, "
        f"stack {comment_text(plan, 'stack', 'stack')}; install as {env_dir}/{name}.env (mode 0600)",
        env_line("KT_SERVE_ARGS", " ".join(argv[3:] + extra)),
        env_line("KT_NUMACTL_ARGS", " ".join(placement)),
        env_line("KT_HEALTH_URL", url),
    ]
    visibility = gpu_visibility(
        serve.get("gpu_indices"), "serve.gpu_indices", serve.get("mig_uuids"), "serve.mig_uuids"
    )
    env += [env_line(k, v) for k, v in visibility.items()]
    variant = serve.get("kt_cpu_variant")
    if variant is not None:
        legacy = plan.get("stack_generation") == "legacy"  # kt-kernel v0.4.4 ignores 0.7.2's names
        known, kt_kernel = (LEGACY_CPU_VARIANTS, "v0.4.4") if legacy else (CPU_VARIANTS, "0.7.2")
        if variant not in known:
            raise RenderError(
                f"plan serve.kt_cpu_variant must be one of {', '.join(known)} or null for the "
                f"{'legacy' if legacy else 'current'} stack's kt-kernel {kt_kernel}, got {shown(variant)}"
            )
        env.append(env_line(CPU_VARIANT_ENV, variant))  # kt-kernel's library, not its own AMX guess
    if api_key:
        env.append(env_line("KT_API_KEY", api_key))
    out.add(f"ktinfra-serve-{name}.env", "\n".join(env) + "\n", mode=0o600)
    out.info = {
        "unit": f"ktinfra-serve@{name}.service",
        "argv": argv + extra,
        # the unit's command line, for runners without systemd (source the env file first)
        "exec_argv": [NUMACTL, *placement, python, "-c", LAUNCH_CODE, *argv[3:], *extra],
        "health_url": url,
        "env_file": f"{env_dir}/{name}.env",
        "numactl_args": placement,
        "numa": placement_reason,
        "warnings": numa_warnings(plan),  # served as asked: the server starts, its memory is elsewhere
    }
    if copies:  # served from the path `lora serve` copies them to (lora.check_planned_adapter)
        out.info["copies"] = [c.planned() for c in copies.values()]
    return out
