"""SGLang-KT's KV bytes a token for an MLA model: as its memory profile counts them and as its pool stores
them (run in the inference env).

Both modules import sgl_kernel, which needs a GPU, so the two pieces of code are read from the installed
sources and run as written: ModelRunnerKVCacheMixin.get_cell_size_per_token (with the config helpers it
calls) and the `self.kv_cache_dim = ...` expression of MLATokenToKVPool.__init__, whose buffers are
`(size + page_size, 1, kv_cache_dim)` per layer.

stdin: {"config": config.json of an MLA model}; stdout: one JSON object.
"""

import __future__

import ast
import functools
import importlib.util
import json
import sys
import types
from pathlib import Path

import torch

ROOT = Path(importlib.util.find_spec("sglang").submodule_search_locations[0])


def tree(module: str) -> ast.Module:
    return ast.parse(ROOT.joinpath(*module.split(".")[1:]).with_suffix(".py").read_text())


def find(nodes, kind, name):
    for node in nodes:
        if isinstance(node, kind) and node.name == name:
            return node
    raise LookupError(name)


def define(namespace: dict, node: ast.AST) -> None:
    module = ast.fix_missing_locations(ast.Module(body=[node], type_ignores=[]))
    code = compile(module, "<sglang>", "exec", flags=__future__.annotations.compiler_flag)  # as the sources
    exec(code, namespace)


def class_constants(cls: ast.ClassDef) -> types.SimpleNamespace:
    values = {}
    for node in cls.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = eval(
                    compile(ast.Expression(node.value), "<sglang>", "eval"), {"torch": torch}
                )
            except Exception:  # noqa: BLE001 - only the literal/torch-dtype constants are needed
                pass
    return types.SimpleNamespace(**values)


config = types.SimpleNamespace(**json.load(sys.stdin)["config"])
namespace = {"torch": torch, "lru_cache": functools.lru_cache, "__name__": "sglang_probe"}
model_config = tree("sglang.srt.configs.model_config").body
for helper in ("is_deepseek_nsa", "is_deepseek_compressed", "get_nsa_index_head_dim"):
    define(namespace, find(model_config, ast.FunctionDef, helper))
pool_module = tree("sglang.srt.mem_cache.memory_pool").body
namespace["NSATokenToKVPool"] = class_constants(find(pool_module, ast.ClassDef, "NSATokenToKVPool"))
common = tree("sglang.srt.utils.common").body
for helper in ("is_cuda", "is_float4_e2m1fn_x2"):
    define(namespace, find(common, ast.FunctionDef, helper))
mixin = find(
    tree("sglang.srt.model_executor.model_runner_kv_cache_mixin").body,
    ast.ClassDef,
    "ModelRunnerKVCacheMixin",
)
define(namespace, find(mixin.body, ast.FunctionDef, "get_cell_size_per_token"))

layers = config.num_hidden_layers
dims = {k: getattr(config, k) for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim")}
# ModelConfig copies these from the HF config unchanged for the DeepSeek-style architectures
runner = types.SimpleNamespace(
    model_config=types.SimpleNamespace(hf_config=config, **dims),
    kv_cache_dtype=torch.bfloat16,
    use_mla_backend=True,
)
profiled = namespace["get_cell_size_per_token"](runner, layers)

init = find(find(pool_module, ast.ClassDef, "MLATokenToKVPool").body, ast.FunctionDef, "__init__")
(dim_expr,) = [
    node.value
    for node in ast.walk(init)
    if isinstance(node, ast.Assign)
    and isinstance(node.targets[0], ast.Attribute)
    and node.targets[0].attr == "kv_cache_dim"
]
pool_self = types.SimpleNamespace(nsa_kv_cache_store_fp8=False)  # bf16 cache: the fp8 override is off
scope = {"self": pool_self, "override_kv_cache_dim": None, **dims}
kv_cache_dim = eval(compile(ast.Expression(dim_expr), "<sglang>", "eval"), scope)
print(
    json.dumps(
        {
            "profiled_cell_bytes": profiled,
            "pool_kv_cache_dim": kv_cache_dim,
            "pool_latent_bytes_per_token": kv_cache_dim * layers * torch.bfloat16.itemsize,
            "layers": layers,
            **dims,
        }
    )
)
