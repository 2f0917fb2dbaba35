#!/usr/bin/env python3
"""INT8 experts as kt-kernel's SFT path takes them, on the AMX host: kt_kernel.sft.weight_manifest's
validate_persistent_int8_weights (what sft/wrapper.py runs before it loads INT8 experts, hashes verified),
then KTMoEWrapper(mode="sft", method="INT8_SFT").load_weights() per layer, on each --weights tree given
(e.g. the layer tree with ktinfra's manifest, and a merged output, which kt-kernel 0.7.2 refuses). Prints
JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def sft_load(cfg: dict, weights: Path, layers: list[int], threads: int, pools: int) -> dict:
    from kt_kernel import KTMoEWrapper

    try:
        for layer in layers:
            wrapper = KTMoEWrapper(
                layer_idx=layer, num_experts=cfg["num_experts"],
                num_experts_per_tok=cfg["num_experts_per_tok"], hidden_size=cfg["hidden_size"],
                moe_intermediate_size=cfg["moe_intermediate_size"],
                gpu_experts_mask=None, cpuinfer_threads=threads, threadpool_count=pools,
                weight_path=str(weights), chunked_prefill_size=64, method="INT8_SFT", mode="sft",
                lora_rank=4, lora_alpha=8.0,
            )  # fmt: skip
            wrapper.load_weights(torch.arange(cfg["num_experts"], dtype=torch.int64))
        return {"loaded": True, "layers": len(layers)}
    except Exception as exc:  # the refusal is the result
        return {"loaded": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def validate(cfg: dict, weights: Path, layers: list[int], pools: int) -> dict:
    from kt_kernel.sft.weight_manifest import validate_persistent_int8_weights

    try:
        found = validate_persistent_int8_weights(
            str(weights), layer_indices=layers, numa_count=pools, expert_num=cfg["num_experts"],
            hidden_size=cfg["hidden_size"], intermediate_size=cfg["moe_intermediate_size"],
            verify_hashes=True,
        )  # fmt: skip
        return {"valid": True, "files": found.file_count, "bytes": found.size_bytes, "layout": found.layout}
    except Exception as exc:
        return {"valid": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--weights", type=Path, action="append", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--pools", type=int, default=1)
    args = parser.parse_args()
    cfg = json.loads((args.model / "config.json").read_text())
    layers = list(range(cfg["num_hidden_layers"]))
    out = {}
    for weights in args.weights:
        out[weights.name] = validate(cfg, weights, layers, args.pools) | sft_load(
            cfg, weights, layers, args.threads, args.pools
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
