"""A converted INT8 expert tree as kt-kernel's convert_cpu_weights.py --no-merge-safetensor lays it out
(_layer_N/_numa_M/INT8_{gate,up,down}_E_SIZEByte_{quant,scale}_.kt), with random bytes of the right sizes.
The real converter needs kt-kernel on an AMX CPU (the device run in docs/results uses it); the layout and
the size contract follow kt-kernel 0.7.2 (operators/amx/moe.hpp names, sft/weight_manifest.py sizes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

TINY = {"hidden_size": 64, "moe_intermediate_size": 32, "num_experts": 4, "num_hidden_layers": 2}


def moe_model(path: Path, **config) -> Path:
    """A model directory whose config.json has a Qwen3-MoE's expert fields (`config` overrides them)."""
    path.mkdir(parents=True, exist_ok=True)
    fields = {"model_type": "qwen3_moe", "torch_dtype": "bfloat16"} | TINY | config
    (path / "config.json").write_text(json.dumps({k: v for k, v in fields.items() if v is not None}))
    return path


def file_sizes(hidden: int, inter: int, numa: int) -> dict[tuple[str, str], int]:
    part = inter // numa
    quant = hidden * part
    scales = {("gate", "scale"): part * 4, ("up", "scale"): part * 4, ("down", "scale"): hidden * 4}
    return {("gate", "quant"): quant, ("up", "quant"): quant, ("down", "quant"): quant} | scales


def write_tree(root: Path, layers=(0, 1), experts=4, hidden=64, inter=32, numa=1, kernel="INT8") -> Path:
    """kernel: the file-name prefix, kt-kernel's T::name() (INT8 for AMXINT8, INT4 for AMXINT4)."""
    for layer in layers:
        for part in range(numa):
            folder = root / f"_layer_{layer}" / f"_numa_{part}"
            folder.mkdir(parents=True, exist_ok=True)
            for (proj, kind), size in file_sizes(hidden, inter, numa).items():
                for expert in range(experts):
                    (folder / f"{kernel}_{proj}_{expert}_{size}Byte_{kind}_.kt").write_bytes(os.urandom(size))
    return root


# Stands in for convert_cpu_weights.py (kt-kernel on an AMX CPU) in role and wrapper tests: reads the model's
# config.json like the real one, writes the layer tree with --no-merge-safetensor (else, like upstream's
# default, merged shards), records its argv in STANDIN_RECORD. STANDIN_CUT=1 leaves out one file.
CONVERTER = """import argparse, json, os, pathlib, sys
p = argparse.ArgumentParser()
for a in ("--input-path", "--input-type", "--output", "--quant-method"): p.add_argument(a, required=True)
p.add_argument("--cpuinfer-threads", type=int, default=60)
p.add_argument("--threadpool-count", type=int, default=2)
p.add_argument("--no-merge-safetensor", action="store_true")
a = p.parse_args()
if os.environ.get("STANDIN_RECORD"):
    with open(os.environ["STANDIN_RECORD"], "a") as fh: fh.write(json.dumps(sys.argv[1:]) + "\\n")
c = json.loads((pathlib.Path(a.input_path) / "config.json").read_text())
out = pathlib.Path(a.output); out.mkdir(parents=True, exist_ok=True)
if not a.no_merge_safetensor:
    (out / "model-00001-of-00001.safetensors").write_bytes(b"merged"); sys.exit(0)
n, h, i = a.threadpool_count, c["hidden_size"], c["moe_intermediate_size"]
sizes = {("gate", "quant"): h * (i // n), ("up", "quant"): h * (i // n), ("down", "quant"): h * (i // n),
         ("gate", "scale"): i // n * 4, ("up", "scale"): i // n * 4, ("down", "scale"): h * 4}
seed = b"".join(f.read_bytes() for f in sorted(pathlib.Path(a.input_path).glob("*.safetensors")))
for layer in range(c["num_hidden_layers"]):
    for part in range(n):
        d = out / f"_layer_{layer}" / f"_numa_{part}"; d.mkdir(parents=True, exist_ok=True)
        for (proj, kind), size in sizes.items():
            for e in range(c["num_experts"]):
                data = (seed * size)[:size] or bytes(size)
                (d / f"INT8_{proj}_{e}_{size}Byte_{kind}_.kt").write_bytes(data)
if os.environ.get("STANDIN_CUT"):
    next(out.rglob("*.kt")).unlink()
"""
