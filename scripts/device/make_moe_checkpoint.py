#!/usr/bin/env python3
"""Write a random-weight checkpoint shaped like Qwen3-30B-A3B's MoE layers (config.json + safetensors).

For running kt-kernel's convert_cpu_weights.py on the GPU + AMX host, where nothing can be downloaded: the
converter reads config.json and the per-expert `model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight`
tensors, so a few layers at the real sizes exercise it as the 30B checkpoint would. Random, not trained.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

QWEN3_30B_A3B = {
    "hidden_size": 2048,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    dims = QWEN3_30B_A3B
    hidden, inter, experts = dims["hidden_size"], dims["moe_intermediate_size"], dims["num_experts"]
    torch.manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "num_hidden_layers": args.layers,
        "torch_dtype": "bfloat16",
        "norm_topk_prob": True,
        **dims,
    }
    (args.out / "config.json").write_text(json.dumps(config, indent=2))
    for layer in range(args.layers):
        router = torch.randn(experts, hidden, dtype=torch.bfloat16)
        tensors = {f"model.layers.{layer}.mlp.gate.weight": router}
        for e in range(experts):
            prefix = f"model.layers.{layer}.mlp.experts.{e}"
            tensors[f"{prefix}.gate_proj.weight"] = (torch.randn(inter, hidden) * 0.02).to(torch.bfloat16)
            tensors[f"{prefix}.up_proj.weight"] = (torch.randn(inter, hidden) * 0.02).to(torch.bfloat16)
            tensors[f"{prefix}.down_proj.weight"] = (torch.randn(hidden, inter) * 0.02).to(torch.bfloat16)
        save_file(tensors, str(args.out / f"model-{layer:05d}.safetensors"))
    print(json.dumps({"out": str(args.out), **config}))


if __name__ == "__main__":
    main()
