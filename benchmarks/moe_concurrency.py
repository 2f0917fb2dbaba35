"""AMXINT8 MoE layer decode time versus concurrent requests (one token each), for the planner's
`max_running_requests`: how much aggregate decode a CPU gains per extra request, and what each request keeps.

Layer shapes: Qwen3-30B-A3B (128 experts, top-8, hidden 2048, moe_intermediate 768, 48 MoE layers; two layers
called alternately so the 2 x 604 MB of int8 experts are not served from L3) and DeepSeek-V3 (256 experts,
top-8, hidden 7168, moe_intermediate 2048, 58 MoE layers; one 11.3 GB layer). Routing is uniform random, fresh
every call: real routers are skewed, so fewer unique experts per step and a little faster than this.
One process per (shape, threads), weights written once to /dev/shm.

    python benchmarks/moe_concurrency.py --threads 14,8 --out moe_concurrency.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from moe_threads import amx_int8_moe, cpu_infer_pools, need  # noqa: E402
from stream import _thread_counts, check_out, comma_choices, write_json  # noqa: E402

SHAPES = {  # experts, top-k, hidden, moe_intermediate, MoE layers in the model, layers built here
    "qwen3-30b-a3b": (128, 8, 2048, 768, 48, 2),
    "deepseek-v3": (256, 8, 7168, 2048, 58, 1),
}
REQUESTS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
WEIGHT_DIR = Path(os.environ.get("KT_BENCH_WEIGHTS", "/dev/shm/ktinfra-bench"))


def weight_files(shape: str) -> list[Path]:
    layers = SHAPES[shape][5]
    return [WEIGHT_DIR / shape / f"layer{i}_{m}.bf16" for i in range(layers) for m in ("gate", "up", "down")]


def make_weights(shape: str) -> None:
    import torch

    experts, _, hidden, inter, _, _ = SHAPES[shape]
    torch.manual_seed(0)
    for path in weight_files(shape):
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        dims = (experts, hidden, inter) if "down" in path.name else (experts, inter, hidden)
        tensor = torch.empty(dims, dtype=torch.bfloat16).normal_(0.0, dims[-1] ** -0.5)
        tmp = path.with_suffix(".tmp")
        tensor.view(torch.int16).numpy().tofile(tmp)
        tmp.rename(path)


def time_requests(cpu_infer, moes, dims, requests: int, budget_s: float = 2.0, on_gpu=None) -> dict:
    """Median forward time over fresh uniform routings; `on_gpu` (a bool mask over the experts): their ids
    are handed over as -1, as kt-kernel skips an expert on the GPU."""
    import torch

    experts, topk, hidden, inter = dims
    sets = [
        torch.stack([torch.randperm(experts)[:topk] for _ in range(requests)]).to(torch.int64).contiguous()
        for _ in range(16)
    ]
    if on_gpu is not None:
        sets = [ids.masked_fill(on_gpu[ids], -1).contiguous() for ids in sets]
    weights = torch.softmax(torch.randn(requests, topk), dim=-1).contiguous()
    x = torch.randn(requests, hidden).to(torch.bfloat16).contiguous()
    out = torch.empty(requests, hidden, dtype=torch.bfloat16)
    bsz = torch.tensor([requests], dtype=torch.int32)
    times, unique, start_all = [], [], time.perf_counter()
    i = 0
    while i < 20 or (i < 200 and time.perf_counter() - start_all < budget_s):
        ids = sets[i % len(sets)]
        task = moes[i % len(moes)].forward_task(
            bsz.data_ptr(), topk, ids.data_ptr(), weights.data_ptr(), x.data_ptr(), out.data_ptr(), False
        )
        start = time.perf_counter()
        cpu_infer.submit(task)
        cpu_infer.sync()
        if i >= 3:  # warm-up calls dropped
            times.append(time.perf_counter() - start)
            unique.append(len(ids[ids >= 0].unique()))
        i += 1
    median = statistics.median(times)
    expert_bytes = 3 * hidden * inter
    return {
        "requests": requests,
        "calls": len(times),
        "median_ms": median * 1e3,
        "unique_experts": statistics.mean(unique),
        "weight_gbps": statistics.mean(unique) * expert_bytes / median / 1e9,
    }


def run_one(shape: str, threads: int) -> dict:
    import kt_kernel
    import torch

    experts, topk, hidden, inter, model_layers, layers = SHAPES[shape]
    ext = kt_kernel.kt_kernel_ext
    cpu_infer = cpu_infer_pools(ext, threads)
    size = experts * hidden * inter
    files = weight_files(shape)
    t0 = time.perf_counter()
    built = []
    for i in range(layers):
        tensors = [torch.from_file(str(f), size=size, dtype=torch.bfloat16) for f in files[3 * i : 3 * i + 3]]
        built.append(amx_int8_moe(ext, cpu_infer, tensors, (experts, hidden, inter), max(REQUESTS)))
    load_s = time.perf_counter() - t0
    torch.set_num_threads(1)
    torch.manual_seed(1)
    moes = [moe for moe, _keep in built]
    rows = [time_requests(cpu_infer, moes, (experts, topk, hidden, inter), n) for n in REQUESTS]
    for row in rows:  # every MoE layer of the model on the CPU, GPU time not counted
        step_s = row["median_ms"] / 1e3 * model_layers
        row["per_request_tok_s"] = 1 / step_s
        row["aggregate_tok_s"] = row["requests"] / step_s
    return {
        "shape": shape,
        "dims": [experts, topk, hidden, inter],
        "moe_layers": model_layers,
        "threads": threads,
        "variant": kt_kernel.__cpu_variant__,
        "load_s": load_s,
        "rows": rows,
    }


_shapes = comma_choices(SHAPES, "shape")


def _one(text: str) -> tuple[str, int]:
    shape, _, threads = text.partition(":")
    return _shapes(shape)[0], _thread_counts(threads)[0]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, all checked before the weights are written (GBs into /dev/shm) and minutes are spent:
    `--threads 14,x`, an unknown shape or an --out in a missing directory failed with a traceback after the
    first shape's weights were made, leaving them in /dev/shm, or ran every shape and wrote nothing."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--threads", type=_thread_counts, default="14,8", help="comma list of CPUInfer thread counts"
    )
    ap.add_argument(
        "--shapes", type=_shapes, default=",".join(SHAPES), help=f"comma list of {', '.join(SHAPES)}"
    )
    ap.add_argument("--one", type=_one, help="internal: SHAPE:THREADS, run in this process")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    check_out(ap, args.out)
    return args


def main() -> int:
    args = parse_args()
    need("torch")  # one clear line before the GBs of weights, not a traceback
    if args.one:
        need("kt_kernel")  # a child without it fails its run with one line (recorded in --out)
        shape, threads = args.one
        write_json(args.out, run_one(shape, threads), indent=None)
        return 0
    results, failed = [], 0
    for shape in args.shapes:
        t0 = time.perf_counter()
        make_weights(shape)
        print(f"{shape}: weights ready in {time.perf_counter() - t0:.0f}s", flush=True)
        for threads in args.threads:
            one = args.out.with_suffix(f".{shape}.t{threads}.json")
            cmd = [sys.executable, __file__, "--one", f"{shape}:{threads}", "--out", str(one)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                failed += 1
                results.append({"shape": shape, "threads": threads, "error": done.stderr[-1500:]})
                print(f"{shape} t={threads}: FAILED rc={done.returncode}: {done.stderr[-300:]}", flush=True)
            else:
                result = json.loads(one.read_text())
                one.unlink()
                results.append(result)
                row = " ".join(f"{r['requests']}:{r['median_ms']:.2f}ms" for r in result["rows"])
                print(f"{shape} t={threads} load={result['load_s']:.0f}s {row}", flush=True)
            # after every run, a failed one too: the last runs' failures were not written when they came
            # after the last success, and a run of failures only wrote no file at all
            write_json(args.out, {"results": results})
        for path in weight_files(shape):
            path.unlink(missing_ok=True)
    if failed:
        print(f"{failed} of {len(results)} runs failed (their errors are in {args.out})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
