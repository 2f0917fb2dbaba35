#!/usr/bin/env python3
"""kt-kernel's RAWINT4 backend on a compressed-tensors int4 checkpoint, against a float32 reference.

Writes one MoE layer shaped like Kimi-K2-Thinking's (hidden 7168, expert width 2048, top-8; fewer experts)
in the compressed-tensors pack-quantized layout the planner sizes (`weight_packed` int32 = 8 nibbles stored
with offset 8, `weight_scale` bf16 per group of 32, `weight_shape`), loads it with KTMoEWrapper(method=
"RAWINT4") as SGLang does for `--kt-method RAWINT4`, and compares its output with the dequantized weights
in float32. A second copy of the layer stores the nibbles in two's complement instead, to show which
encoding the kernel reads. Timing: mean ms per forward at 1 and 64 tokens. Prints one JSON object; run it
once per backend (KT_RAWINT4_BACKEND=amx | avx2 selects kt-kernel 0.7's backend). Random weights.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from convert_check import cpu_moe, reference  # the float32 MoE reference the AMXINT8/INT4 check uses
from safetensors.torch import save_file

GROUP = 32


def quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int4 per group of 32 along the input dim: (q in [-8, 7], bf16 scales)."""
    out, inp = w.shape
    groups = w.view(out, inp // GROUP, GROUP)
    scale = (groups.abs().amax(-1) / 7).clamp_min(1e-8).to(torch.bfloat16)
    q = torch.clamp(torch.round(groups / scale.float().unsqueeze(-1)), -8, 7).to(torch.int8)
    return q.view(out, inp), scale


def pack(q: torch.Tensor, offset: bool) -> torch.Tensor:
    """8 nibbles per int32, element k of each eight in bits 4k (compressed-tensors pack_to_int32)."""
    nibbles = (q.to(torch.int64) + 8) if offset else (q.to(torch.int64) & 0xF)
    out, inp = q.shape
    packed = (nibbles.view(out, inp // 8, 8) << (torch.arange(8, dtype=torch.int64) * 4)).sum(-1)
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)  # the same 32 bits, signed


def write_layer(path: Path, weights: dict, offset: bool) -> None:
    tensors = {}
    for e, projs in enumerate(weights):
        for name, (q, scale) in projs.items():
            key = f"model.layers.0.mlp.experts.{e}.{name}_proj"
            tensors[f"{key}.weight_packed"] = pack(q, offset)
            tensors[f"{key}.weight_scale"] = scale
            tensors[f"{key}.weight_shape"] = torch.tensor(list(q.shape), dtype=torch.int32)
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"))


def dequant(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out, inp = q.shape
    return (q.float().view(out, inp // GROUP, GROUP) * scale.float().unsqueeze(-1)).view(out, inp)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kt-rawint4"))
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--threads", type=int, default=14)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    from kt_kernel.utils.amx import NativeMoEWrapper

    hidden, inter, topk, experts = 7168, 2048, 8, args.experts
    torch.manual_seed(0)
    quantized, dense = [], {"gate": [], "up": [], "down": []}
    for _ in range(experts):
        projs = {
            "gate": quantize(torch.randn(inter, hidden) * 0.02),
            "up": quantize(torch.randn(inter, hidden) * 0.02),
            "down": quantize(torch.randn(hidden, inter) * 0.02),
        }
        quantized.append(projs)
        for name, (q, s) in projs.items():
            dense[name].append(dequant(q, s))
    dense = {name: torch.stack(ws) for name, ws in dense.items()}
    backend_env = os.environ.get("KT_RAWINT4_BACKEND", "auto")
    result = {"backend_env": backend_env, "experts": experts, "encodings": {}}
    dev = torch.device("cuda")
    for layer_dir, offset in (("offset8", True), ("twos-complement", False)):
        path = args.dir / layer_dir
        write_layer(path, quantized, offset)
        NativeMoEWrapper.force_release_loader()  # the loader is a class-wide singleton bound to one path
        wrapper = cpu_moe(
            path, "RAWINT4", experts=experts, topk=topk, hidden=hidden, width=inter, threads=args.threads
        )
        stream = torch.cuda.current_stream().cuda_stream
        x = torch.randn(args.tokens, hidden) * 0.5
        ids = torch.stack([torch.randperm(experts)[:topk] for _ in range(args.tokens)])
        topk_w = torch.softmax(torch.randn(args.tokens, topk), dim=-1)
        got = wrapper.forward(x.to(torch.bfloat16).to(dev), ids.to(dev), topk_w.float().to(dev), stream)
        torch.cuda.synchronize()
        want = reference(dense, x.to(torch.bfloat16).float(), ids, topk_w)
        rel = float((got.float().cpu() - want).norm() / want.norm())
        timing = {}
        for qlen in (1, 64):
            xs = (torch.randn(qlen, hidden) * 0.5).to(torch.bfloat16).to(dev)
            qi = torch.stack([torch.randperm(experts)[:topk] for _ in range(qlen)]).to(dev)
            qw = torch.softmax(torch.randn(qlen, topk), dim=-1).float().to(dev)
            wrapper.forward(xs, qi, qw, stream)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(args.calls):
                wrapper.forward(xs, qi, qw, stream)
            torch.cuda.synchronize()
            timing[f"ms_qlen{qlen}"] = round((time.perf_counter() - start) * 1000 / args.calls, 2)
        backend = type(getattr(wrapper, "moe", None)).__name__
        result["encodings"][layer_dir] = {"rel_l2": round(rel, 4), "backend": backend, **timing}
        del wrapper
    print(json.dumps(result))


if __name__ == "__main__":
    main()
