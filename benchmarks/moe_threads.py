"""AMXINT8 MoE layer throughput versus CPUInfer threads and threadpool count (one process per config).

Layer shape: Qwen3-30B-A3B (128 experts, top-8, hidden 2048, moe_intermediate 768). Two layers are built and
called alternately with fresh random routing each call, so the int8 experts touched (2 x 604 MB) do not sit
in the last-level cache. Decode shapes: 1..16 tokens; prefill shapes: 512 and 2048 tokens.

    python benchmarks/moe_threads.py --out moe_threads.json                 # the sweep
    python benchmarks/moe_threads.py --threads 16 --pools 1 --out one.json  # one config
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
from stream import check_out, write_json  # noqa: E402

EXPERTS, TOPK, HIDDEN, INTER = 128, 8, 2048, 768
LAYERS = 2
DECODE = (1, 2, 4, 8, 16)
PREFILL = (512, 2048)
WEIGHT_DIR = Path(os.environ.get("KT_BENCH_WEIGHTS", "/dev/shm/ktinfra-bench"))
EXPERT_INT8_BYTES = 3 * HIDDEN * INTER  # gate + up + down, one byte per weight (scales add 0.3%)


def weight_files() -> list[Path]:
    return [WEIGHT_DIR / f"layer{i}_{name}.bf16" for i in range(LAYERS) for name in ("gate", "up", "down")]


def make_weights() -> None:
    """Random bf16 weights written once to shared memory, so each config process maps them in seconds."""
    import torch

    WEIGHT_DIR.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for path in weight_files():
        if path.exists():
            continue
        shape = (EXPERTS, HIDDEN, INTER) if "down" in path.name else (EXPERTS, INTER, HIDDEN)
        scale = shape[-1] ** -0.5
        tensor = torch.empty(shape, dtype=torch.bfloat16)
        for e in range(EXPERTS):
            tensor[e] = (torch.randn(shape[1:]) * scale).to(torch.bfloat16)
        tmp = path.with_suffix(".tmp")
        tensor.view(torch.int16).numpy().tofile(tmp)
        tmp.rename(path)


def load_layer(ext, cpu_infer, idx: int, max_len: int):
    import torch

    files = weight_files()[3 * idx : 3 * idx + 3]
    size = EXPERTS * HIDDEN * INTER
    tensors = [torch.from_file(str(f), shared=False, size=size, dtype=torch.bfloat16) for f in files]
    return amx_int8_moe(ext, cpu_infer, tensors, (EXPERTS, HIDDEN, INTER), max_len)


def amx_int8_moe(ext, cpu_infer, tensors: list, dims: tuple[int, int, int], max_len: int):
    """An AMXInt8_MOE layer over [gate, up, down] BF16 tensors, dims = (experts, hidden, inter), weights
    loaded. Returns it with the buffers it points into, which must outlive it."""
    import torch

    experts, hidden, inter = dims
    mask = torch.zeros(experts, dtype=torch.bool)
    cfg = ext.moe.MOEConfig(experts, TOPK, hidden, inter, mask.data_ptr())
    cfg.max_len = max_len
    cfg.gate_proj, cfg.up_proj, cfg.down_proj = (t.data_ptr() for t in tensors)
    cfg.pool = cpu_infer.backend_
    moe = ext.moe.AMXInt8_MOE(cfg)
    phys = torch.arange(experts, dtype=torch.int64)
    cpu_infer.submit(moe.load_weights_task(phys.data_ptr()))
    cpu_infer.sync()
    return moe, (tensors, mask, phys)


def routing(qlen: int, sets: int):
    import torch

    return [
        torch.stack([torch.randperm(EXPERTS)[:TOPK] for _ in range(qlen)]).to(torch.int64).contiguous()
        for _ in range(sets)
    ]


def time_shape(cpu_infer, moes, qlen: int, calls: int) -> dict:
    import torch

    sets = routing(qlen, 16)
    weights = torch.softmax(torch.randn(qlen, TOPK), dim=-1).contiguous()
    x = torch.randn(qlen, HIDDEN).to(torch.bfloat16).contiguous()
    out = torch.empty(qlen, HIDDEN, dtype=torch.bfloat16)
    bsz = torch.tensor([qlen], dtype=torch.int32)
    unique_per_set = [len(ids.unique()) for ids in sets]
    times, unique = [], []
    for i in range(calls + max(3, calls // 10)):
        ids = sets[i % len(sets)]
        task = moes[i % len(moes)].forward_task(
            bsz.data_ptr(), TOPK, ids.data_ptr(), weights.data_ptr(), x.data_ptr(), out.data_ptr(), False
        )
        start = time.perf_counter()
        cpu_infer.submit(task)
        cpu_infer.sync()
        elapsed = time.perf_counter() - start
        if i >= max(3, calls // 10):  # warm-up calls dropped
            times.append(elapsed)
            unique.append(unique_per_set[i % len(sets)])
    median = statistics.median(times)
    touched = statistics.mean(unique) * EXPERT_INT8_BYTES
    return {
        "qlen": qlen,
        "calls": calls,
        "median_ms": median * 1e3,
        "p10_ms": sorted(times)[len(times) // 10] * 1e3,
        "tokens_per_s": qlen / median,
        "unique_experts": statistics.mean(unique),
        "weight_gbps": touched / median / 1e9,
        "tops": qlen * TOPK * 3 * HIDDEN * INTER * 2 / median / 1e12,
    }


def fixed_overhead_ms(ext, cpu_infer) -> float:
    """Median latency of a tiny layer (16 experts, 512x256) at one token: dispatch and sync cost, not work."""
    import torch

    experts, hidden, inter = 16, 512, 256
    tensors = [torch.randn(experts, inter, hidden).to(torch.bfloat16) for _ in range(2)]
    tensors.append(torch.randn(experts, hidden, inter).to(torch.bfloat16))
    # max_len 64: AMX buffers need a multiple of the kernel's M step
    moe, _keep = amx_int8_moe(ext, cpu_infer, tensors, (experts, hidden, inter), 64)
    ids = torch.randperm(experts)[:TOPK].view(1, TOPK).to(torch.int64).contiguous()
    w = torch.full((1, TOPK), 1.0 / TOPK)
    x = torch.randn(1, hidden).to(torch.bfloat16)
    out = torch.empty(1, hidden, dtype=torch.bfloat16)
    bsz = torch.tensor([1], dtype=torch.int32)
    times = []
    for i in range(220):
        task = moe.forward_task(
            bsz.data_ptr(), TOPK, ids.data_ptr(), w.data_ptr(), x.data_ptr(), out.data_ptr(), False
        )
        start = time.perf_counter()
        cpu_infer.submit(task)
        cpu_infer.sync()
        if i >= 20:
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


# A tensor-parallel rank's scheduler as the CPU sees it: kernel launches and synchronizes on its own GPU in a
# loop (CUDA spin-waits in a sync while the process has fewer contexts than CPUs). Prints once it runs.
CUDA_SPINNER = """import sys, torch
dev = torch.device("cuda", int(sys.argv[1]) % torch.cuda.device_count())
x = torch.zeros(1024, device=dev)
x.add_(1); torch.cuda.synchronize(dev); print("ready", flush=True)
while True:
    x.add_(1); torch.cuda.synchronize(dev)
"""


def start_spinners(count: int, kind: str = "cpu") -> list[subprocess.Popen]:
    """Busy processes standing in for the serving process's own busy threads (scheduler, CUDA launches):
    `cpu` spins in Python; `cuda` launches and synchronizes on GPU i (i-th spinner, modulo the GPUs), as
    the schedulers of tensor-parallel ranks 1.. do beside rank 0's kt-kernel."""
    if kind == "cpu":
        return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    procs = [
        subprocess.Popen([sys.executable, "-c", CUDA_SPINNER, str(i)], stdout=subprocess.PIPE, text=True)
        for i in range(count)
    ]
    for proc in procs:  # CUDA's start-up takes seconds: measure only once every spinner spins
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"cuda spinner exited with {proc.wait()}")
    return procs


def cpu_infer_pools(ext, threads: int, pools: int = 1, nodes: list[int] | tuple[int, ...] = (0,)):
    """kt-kernel's CPUInfer over `pools` worker pools on `nodes` (round robin), the threads shared evenly."""
    cfg = ext.WorkerPoolConfig()
    cfg.subpool_count = pools
    cfg.subpool_numa_map = [nodes[i % len(nodes)] for i in range(pools)]
    cfg.subpool_thread_count = [threads // pools + (1 if i < threads % pools else 0) for i in range(pools)]
    return ext.CPUInfer(cfg)


def need(module: str):
    """`module` imported, or the run ends with one clear line (exit 1) instead of a traceback: kt-kernel (and
    torch) are only on a KT host, so a run elsewhere or in a venv without them is expected."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        sys.exit(f"error: {Path(sys.argv[0]).name} needs {module} (kt-kernel's environment): {exc}")


def run_one(threads: int, pools: int, nodes: list[int], spinners: int = 0, kind: str = "cpu") -> dict:
    kt_kernel = need("kt_kernel")
    import torch

    ext = kt_kernel.kt_kernel_ext
    cpu_infer = cpu_infer_pools(ext, threads, pools, nodes)
    t0 = time.perf_counter()
    layers = [load_layer(ext, cpu_infer, i, max(PREFILL)) for i in range(LAYERS)]
    load_s = time.perf_counter() - t0
    moes = [moe for moe, _keep in layers]
    torch.manual_seed(1)
    torch.set_num_threads(1)  # keep torch's own OpenMP pool from competing with the CPUInfer workers
    busy = start_spinners(spinners, kind)
    try:
        overhead = fixed_overhead_ms(ext, cpu_infer)
    except RuntimeError as exc:
        overhead = None
        print(f"tiny layer: {exc}", file=sys.stderr)
    shapes = [time_shape(cpu_infer, moes, q, 200) for q in DECODE]
    shapes += [time_shape(cpu_infer, moes, q, 12 if q <= 512 else 4) for q in PREFILL]
    for proc in busy:
        proc.kill()
    return {
        "threads": threads,
        "pools": pools,
        "spinners": spinners,
        "spinner_kind": kind,
        "numa_map": [nodes[i % len(nodes)] for i in range(pools)],
        "variant": kt_kernel.__cpu_variant__,
        "load_s": load_s,
        "tiny_layer_ms": overhead,
        "shapes": shapes,
    }


def sweep_configs(cores: int, nodes: list[int]) -> list[tuple[int, int]]:
    threads = sorted({1, 2, 4, 6, 8, 10, 12, 14, cores - 1, cores, int(os.cpu_count() * 0.8)} - {0})
    configs = [(t, 1) for t in threads if t <= cores]
    for pools in (2, 4):
        configs += [(cores, pools), (max(pools, cores // 2), pools)]
    if len(nodes) > 1:
        configs.append((cores, len(nodes)))
    return list(dict.fromkeys(configs))


def _count(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more, not {text}")
        return value

    return parse


def _nodes(text: str) -> list[int]:
    return [_count(0)(n.strip()) for n in text.split(",")]


def _configs(text: str) -> list[tuple[int, int, int]]:
    configs = []
    for item in text.split(","):
        sizes, _, spinners = item.strip().partition("+")
        threads, x, pools = sizes.partition("x")
        if not x:
            raise argparse.ArgumentTypeError(f"{item!r}: not THREADSxPOOLS[+SPINNERS]")
        configs.append((_count(1)(threads), _count(1)(pools), _count(0)(spinners) if spinners else 0))
    return configs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, all checked before the weights are written (2.4 GB into /dev/shm) and the sweep's minutes
    are spent: `--configs 12`, `--threads 0` or an --out in a missing directory failed with a traceback after
    the weights were made, or ran every config and wrote nothing."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=_count(1))
    ap.add_argument("--pools", type=_count(1), default=1)
    ap.add_argument(
        "--numa-nodes", type=_nodes, default=[0], help="comma list of NUMA node ids holding usable cpus"
    )
    ap.add_argument("--cores", type=_count(1), default=os.cpu_count(), help="usable physical cores")
    ap.add_argument("--spinners", type=_count(0), default=0, help="busy processes running beside the layer")
    ap.add_argument("--spinner-kind", choices=("cpu", "cuda"), default="cpu", help="what a busy process does")
    ap.add_argument(
        "--configs",
        type=_configs,
        help="THREADSxPOOLS[+SPINNERS] list, e.g. 12x1,15x1+1 (default: the sweep)",
    )
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    check_out(ap, args.out)
    runs = [(args.threads, args.pools)] if args.threads else [c[:2] for c in args.configs or []]
    for threads, pools in runs:  # a pool of no thread: its share of the experts is never computed
        if pools > threads:
            ap.error(f"{threads} threads in {pools} pools: a pool would have no thread")
    return args


def main() -> int:
    args = parse_args()
    nodes = args.numa_nodes
    need("torch")
    make_weights()
    if args.threads:
        write_json(args.out, run_one(args.threads, args.pools, nodes, args.spinners, args.spinner_kind), None)
        return 0
    results, failed = [], 0
    configs = args.configs or [(t, p, 0) for t, p in sweep_configs(args.cores, nodes)]
    for threads, pools, spinners in configs:
        one = args.out.with_suffix(f".t{threads}p{pools}s{spinners}.json")
        cmd = [
            sys.executable,
            __file__,
            "--threads",
            str(threads),
            "--pools",
            str(pools),
            "--spinners",
            str(spinners),
            "--spinner-kind",
            args.spinner_kind,
        ]
        cmd += ["--numa-nodes", ",".join(map(str, nodes)), "--out", str(one)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            failed += 1
            results.append(
                {"threads": threads, "pools": pools, "spinners": spinners, "error": done.stderr[-1500:]}
            )
            print(f"t={threads} p={pools}: FAILED rc={done.returncode}: {done.stderr[-300:]}", flush=True)
        else:
            result = json.loads(one.read_text())
            one.unlink()
            results.append(result)
            row = " ".join(f"q{s['qlen']}={s['tokens_per_s']:.0f}" for s in result["shapes"])
            tiny = result["tiny_layer_ms"] or float("nan")
            print(
                f"t={threads:2d} p={pools} s={spinners} load={result['load_s']:.1f}s tiny={tiny:.2f}ms {row}",
                flush=True,
            )
        # after every config, a failed one too: failures after the last success were never written
        write_json(args.out, {"layer": [EXPERTS, TOPK, HIDDEN, INTER], "configs": results})
    if failed:
        print(f"{failed} of {len(results)} configs failed (their errors are in {args.out})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
