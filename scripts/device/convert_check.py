#!/usr/bin/env python3
"""Load converted AMXINT8/AMXINT4 CPU weights with kt-kernel and compare each layer's MoE output with a
float32 reference computed from the original BF16 checkpoint (same tokens, same routing). Prints JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors import safe_open


def expert_weights(model: Path, layer: int, experts: int) -> dict[str, torch.Tensor]:
    out: dict[str, list[torch.Tensor]] = {"gate": [], "up": [], "down": []}
    for path in sorted(model.glob("*.safetensors")):
        with safe_open(str(path), "pt") as f:
            if f"model.layers.{layer}.mlp.experts.0.gate_proj.weight" not in f.keys():
                continue
            for e in range(experts):
                for proj in out:
                    out[proj].append(f.get_tensor(f"model.layers.{layer}.mlp.experts.{e}.{proj}_proj.weight"))
    return {k: torch.stack(v).float() for k, v in out.items()}


def reference(w: dict, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    y = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for k in range(ids.shape[1]):
            e = int(ids[t, k])
            h = torch.nn.functional.silu(w["gate"][e] @ x[t]) * (w["up"][e] @ x[t])
            y[t] += weights[t, k] * (w["down"][e] @ h)
    return y


def cpu_moe(
    weight_path: Path,
    method: str,
    *,
    experts: int,
    topk: int,
    hidden: int,
    width: int,
    threads: int,
    pools: int = 1,
    layer: int = 0,
    chunk: int = 64,
):
    """kt-kernel's MoE layer with every expert on the CPU, loaded, as SGLang builds it for --kt-method."""
    from kt_kernel import KTMoEWrapper

    moe = KTMoEWrapper(
        layer_idx=layer,
        num_experts=experts,
        num_experts_per_tok=topk,
        hidden_size=hidden,
        moe_intermediate_size=width,
        gpu_experts_mask=torch.zeros(experts, dtype=torch.bool),
        cpuinfer_threads=threads,
        threadpool_count=pools,
        weight_path=str(weight_path),
        chunked_prefill_size=chunk,
        method=method,
    )
    moe.load_weights(torch.arange(experts, dtype=torch.int64))
    return moe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="original BF16 checkpoint")
    parser.add_argument("--weights", type=Path, required=True, help="converted CPU weights")
    parser.add_argument("--method", default="AMXINT8")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--pools", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    cfg = json.loads((args.model / "config.json").read_text())
    experts, topk = cfg["num_experts"], cfg["num_experts_per_tok"]
    torch.manual_seed(1)
    results = []
    for layer in range(cfg["num_hidden_layers"]):
        wrapper = cpu_moe(
            args.weights, args.method, experts=experts, topk=topk, hidden=cfg["hidden_size"],
            width=cfg["moe_intermediate_size"], threads=args.threads, pools=args.pools, layer=layer,
            chunk=max(args.tokens, 64),
        )  # fmt: skip
        x = torch.randn(args.tokens, cfg["hidden_size"]) * 0.5
        ids = torch.stack([torch.randperm(experts)[:topk] for _ in range(args.tokens)])
        weights = torch.softmax(torch.randn(args.tokens, topk), dim=-1)
        dev = torch.device("cuda")
        stream = torch.cuda.current_stream()
        got = wrapper.forward(
            x.to(torch.bfloat16).to(dev), ids.to(dev), weights.float().to(dev), stream.cuda_stream
        )
        torch.cuda.synchronize()
        original = expert_weights(args.model, layer, experts)
        want = reference(original, x.to(torch.bfloat16).float(), ids, weights)
        rel = float((got.float().cpu() - want).norm() / want.norm())
        results.append({"layer": layer, "rel_l2": round(rel, 4)})
    print(json.dumps({"method": args.method, "tokens": args.tokens, "layers": results}))


if __name__ == "__main__":
    main()
