"""STREAM-like memory bandwidth with torch (copy, scale, add, triad, read) over multi-GB float32 arrays.

Counts bytes as STREAM does (copy/scale 2 arrays, add/triad 3, read 1), best of --reps, per thread count.

    python benchmarks/stream.py --gib 2 --threads 1,2,4,8,16 --out stream.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def kernels(torch, a, b, c, s: float) -> dict:
    return {
        "copy": (lambda: c.copy_(a), 2),
        "scale": (lambda: torch.mul(c, s, out=b), 2),
        "add": (lambda: torch.add(a, b, out=c), 3),
        "triad": (lambda: torch.add(b, c, alpha=s, out=a), 3),
        "read": (lambda: a.sum(), 1),
    }


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=2.0, help="size of each of the 3 arrays")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    n = int(args.gib * 2**30 / 4)
    a, b, c = (torch.full((n,), v, dtype=torch.float32) for v in (1.0, 2.0, 0.0))  # first touch here
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for name, (fn, arrays) in kernels(torch, a, b, c, 3.0).items():
            best = float("inf")
            for _ in range(args.reps):
                start = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - start)
            gbps = arrays * n * 4 / best / 1e9
            rows.append({"threads": threads, "kernel": name, "gbps": gbps, "best_s": best})
        line = " ".join(f"{r['kernel']}={r['gbps']:.1f}" for r in rows if r["threads"] == threads)
        print(f"threads={threads:2d} GB/s {line}", flush=True)
    args.out.write_text(json.dumps({"array_bytes": n * 4, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
