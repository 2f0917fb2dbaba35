"""Parse rendered serve argv lists with SGLang-KT's own argument parser (run in the inference env).

stdin: JSON list of argv lists (the arguments after `-m sglang.launch_server`); stdout: one JSON object per
argv with the parsed values the plan decides, or the parser's error. ServerArgs itself is not built: its
__post_init__ needs a GPU.
"""

import argparse
import contextlib
import io
import json
import sys

from kt_kernel.experts import INFERENCE_METHODS
from sglang.srt.server_args import ServerArgs

KEYS = (
    "host",
    "port",
    "model_path",
    "trust_remote_code",
    "mem_fraction_static",
    "chunked_prefill_size",
    "max_running_requests",
    "max_total_tokens",
    "max_mamba_cache_size",
    "cuda_graph_max_bs",
    "tensor_parallel_size",
    "served_model_name",
    "enable_mixed_chunk",
    "kt_method",
    "kt_weight_path",
    "kt_cpuinfer",
    "kt_threadpool_count",
    "kt_numa_nodes",
    "kt_num_gpu_experts",
    "kt_max_deferred_experts_per_token",
    "kt_gpu_prefill_token_threshold",
    "enable_lora",
    "lora_paths",
    "max_loras_per_batch",
    "lora_backend",
    "api_key",
)


def parse(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(argv)
    except SystemExit:
        return {"error": err.getvalue().strip().splitlines()[-1]}
    values = {key: getattr(ns, key) for key in KEYS}
    values["kt_method_known"] = values["kt_method"] in INFERENCE_METHODS
    return values


print(json.dumps([parse(argv) for argv in json.load(sys.stdin)], default=str))
