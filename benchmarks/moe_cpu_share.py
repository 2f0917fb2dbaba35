"""What the CPU's share of a Qwen3-235B-A22B decode step costs in kt-kernel's AMXINT8 and BF16 backends when
only some of each layer's experts are left on the CPU (the rest on the GPU: `gpu_experts_mask`), for the
planner's FEW_CPU_EXPERTS_SHARE: is a 227 GB AMXINT8 conversion worth it when the CPU runs 2 of 128 experts?

Layer: 128 experts, top-8, hidden 4096, moe_intermediate 1536 (94 MoE layers in the model), random bf16
weights; AMXInt8_MOE quantizes them online as kt-kernel's converter would, AMXBF16_MOE reads them per expert
as the BF16 method reads the checkpoint. Routing is uniform random top-8 over all 128 experts, fresh every
call. A GPU expert is marked two ways (--skip-by): in the layer's `gpu_experts_mask` (as sglang-kt builds it
with --kt-num-gpu-experts), or by an id of -1 in the routing handed to the CPU. One process per method.

    python benchmarks/moe_cpu_share.py --threads 14 --out moe_cpu_share.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from moe_concurrency import time_requests  # noqa: E402
from moe_threads import cpu_infer_pools, need  # noqa: E402
from stream import _positive, check_out, comma_choices, write_json  # noqa: E402

EXPERTS, TOPK, HIDDEN, INTER, MOE_LAYERS = 128, 8, 4096, 1536, 94
CPU_EXPERTS = (128, 32, 8, 2, 0)
REQUESTS = (1, 8, 32, 128)
METHODS = ("AMXINT8", "BF16")
SKIP_BY = ("mask", "ids")


def random_layer():
    import torch

    torch.manual_seed(0)
    gate = torch.randn(EXPERTS, INTER, HIDDEN, dtype=torch.bfloat16) * HIDDEN**-0.5
    up = torch.randn(EXPERTS, INTER, HIDDEN, dtype=torch.bfloat16) * HIDDEN**-0.5
    down = torch.randn(EXPERTS, HIDDEN, INTER, dtype=torch.bfloat16) * INTER**-0.5
    return gate, up, down


def build(ext, cpu_infer, method: str, weights, on_cpu: int):
    """One MoE layer with the first EXPERTS - on_cpu experts marked as on the GPU; returns it with the
    buffers it points into, which must outlive it."""
    import torch

    # pinned as kt-kernel's wrapper allocates it: MOEConfig's (..., int num_gpu_experts) overload comes before
    # (..., uintptr_t mask), so a mask at an address below 2**31 (malloc's heap) is read as an expert count
    mask = torch.zeros(EXPERTS, dtype=torch.bool, pin_memory=torch.cuda.is_available())
    mask[: EXPERTS - on_cpu] = True
    cfg = ext.moe.MOEConfig(EXPERTS, TOPK, HIDDEN, INTER, mask.data_ptr())
    build.seen = {"config_num_gpu_experts": cfg.num_gpu_experts,
                  "config_holds_the_mask": cfg.gpu_experts_mask == mask.data_ptr()}  # fmt: skip
    cfg.max_len = max(REQUESTS)
    cfg.pool = cpu_infer.backend_
    if method == "AMXINT8":
        cfg.gate_proj, cfg.up_proj, cfg.down_proj = (t.data_ptr() for t in weights)
        moe = ext.moe.AMXInt8_MOE(cfg)
    else:
        per_expert = ([[t[e].data_ptr() for e in range(EXPERTS)]] for t in weights)
        cfg.gate_projs, cfg.up_projs, cfg.down_projs = per_expert
        cfg.gate_scales = cfg.up_scales = cfg.down_scales = [[0] * EXPERTS]
        moe = ext.moe.AMXBF16_MOE(cfg)
    phys = torch.arange(EXPERTS, dtype=torch.int64)
    cpu_infer.submit(moe.load_weights_task(phys.data_ptr()))
    cpu_infer.sync()
    return moe, (mask, phys)


def run_one(method: str, threads: int, skip_by: str) -> dict:
    kt_kernel = need("kt_kernel")
    import torch

    ext = kt_kernel.kt_kernel_ext
    cpu_infer = cpu_infer_pools(ext, threads)
    t0 = time.perf_counter()
    weights = random_layer()
    made_s = time.perf_counter() - t0
    torch.set_num_threads(1)
    rows = []
    for on_cpu in CPU_EXPERTS:
        t0 = time.perf_counter()
        moe, keep = build(ext, cpu_infer, method, weights, on_cpu if skip_by == "mask" else EXPERTS)
        load_s = time.perf_counter() - t0
        on_gpu = torch.arange(EXPERTS) < EXPERTS - on_cpu if skip_by == "ids" else None
        torch.manual_seed(1)
        for n in REQUESTS:
            timed = time_requests(cpu_infer, [moe], (EXPERTS, TOPK, HIDDEN, INTER), n, 1.5, on_gpu)
            timed["step_ms"] = timed["median_ms"] * MOE_LAYERS
            del timed["weight_gbps"]  # int8 bytes: not what a BF16 layer reads
            rows.append({"cpu_experts": on_cpu, "load_s": load_s, **build.seen, **timed})
        del moe, keep
    return {"method": method, "skip_by": skip_by, "threads": threads, "variant": kt_kernel.__cpu_variant__,
            "weights_made_s": made_s, "rows": rows}  # fmt: skip


def table(results: list[dict]) -> str:
    heads = " | ".join(f"{n} req: ms/layer (ms/step)" for n in REQUESTS)
    rule = "|---|---|---:|" + "---:|" * len(REQUESTS)
    lines = [f"| method | GPU experts by | CPU experts | {heads} |", rule]
    for result in results:
        if "error" in result:
            lines.append(f"| {result['method']} | {result['skip_by']} | error | {result['error'][-200:]!r} |")
            continue
        for on_cpu in CPU_EXPERTS:
            rows = [r for r in result["rows"] if r["cpu_experts"] == on_cpu]
            cells = " | ".join(f"{r['median_ms']:.3f} ({r['step_ms']:.1f})" for r in rows)
            lines.append(f"| {result['method']} | {result['skip_by']} | {on_cpu} of {EXPERTS} | {cells} |")
    return "\n".join(lines)


def _choices(known: tuple[str, ...]):
    """A comma list of `known` names: build() takes anything but AMXINT8 for BF16 and run_one anything but
    `mask` for all experts on the CPU, so 'amxint8' or 'idz' ran another measurement under the name given."""
    return comma_choices(known)


def _one(text: str) -> tuple[str, str]:
    method, _, skip_by = text.partition(":")
    return _choices(METHODS)(method)[0], _choices(SKIP_BY)(skip_by)[0]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, all checked before the first child spends minutes building layers."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=_positive(int), default=14)
    ap.add_argument("--methods", type=_choices(METHODS), default=",".join(METHODS))
    ap.add_argument(
        "--skip-by", type=_choices(SKIP_BY), default=",".join(SKIP_BY), help="comma list of mask, ids"
    )
    ap.add_argument("--one", type=_one, help="internal: METHOD:SKIP_BY, run in this process")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    check_out(ap, args.out)
    return args


def main() -> int:
    args = parse_args()
    if args.one:
        method, skip_by = args.one
        write_json(args.out, run_one(method, args.threads, skip_by), indent=None)
        return 0
    results, failed = [], 0
    for method, skip_by in ((m, s) for m in args.methods for s in args.skip_by):
        one = args.out.with_suffix(f".{method}.{skip_by}.json")
        cmd = [sys.executable, __file__, "--one", f"{method}:{skip_by}", "--threads", str(args.threads),
               "--out", str(one)]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            failed += 1
            error = done.stderr[-1500:]
            results.append({"method": method, "skip_by": skip_by, "threads": args.threads, "error": error})
            print(f"{method} {skip_by}: FAILED rc={done.returncode}: {done.stderr[-400:]}", flush=True)
        else:
            results.append(json.loads(one.read_text()))
            one.unlink()
        write_json(args.out, {"results": results})
    print(table(results), flush=True)
    if failed:
        print(f"{failed} of {len(results)} runs failed (their errors are in {args.out})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
