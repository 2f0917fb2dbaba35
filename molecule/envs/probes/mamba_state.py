"""SGLang-KT's own size of one linear-attention state slot (run in the inference env).

stdin: {"config": config.json of a Qwen3-Next model, "tp": [tensor-parallel sizes]}; stdout: one JSON object
with, per TP size, the bytes of one slot over all ranks (mamba_cache_per_req x tp), the layers it covers,
and the ratio of pool slots to running requests SGLang's radix cache uses.
"""

import ast
import importlib.util
import json
import sys
from pathlib import Path

import sglang.srt.layers.dp_attention as dp_attention
from sglang.srt.configs.qwen3_next import Qwen3NextConfig


def module_constant(module: str, name: str):
    """A module-level constant read from the source: importing the model runner needs a GPU."""
    root = Path(importlib.util.find_spec("sglang").submodule_search_locations[0])
    source = root.joinpath(*module.split(".")[1:]).with_suffix(".py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError(f"{module}.{name}")


request = json.load(sys.stdin)
config = Qwen3NextConfig(**request["config"])
slots = {}
for tp in request["tp"]:
    # the attention TP group is only set up by a running server; the config asks it for its shard count
    dp_attention.get_attention_tp_size = lambda tp=tp: tp
    params = config.mamba2_cache_params
    slots[str(tp)] = {"bytes": params.mamba_cache_per_req * tp, "layers": len(params.layers)}
ratio = module_constant(
    "sglang.srt.model_executor.model_runner_kv_cache_mixin", "MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO"
)
print(json.dumps({"slots": slots, "slots_per_running_request": ratio}))
