"""Probe: kt-kernel import, loaded CPU variant, and an AMXINT8 MoE forward checked against float32.

Runs on the target with the inference env's python. argv[1] is a JSON object:
  {"mode": "info"} or {"mode": "forward", "threads": 16, "numa_nodes": [0], "qlens": [1, 7, 64], ...}
Prints one JSON line (diagnostics go to stderr).
"""

import json
import os
import sys
import time


def info() -> dict:
    import importlib.metadata as md

    import kt_kernel

    ext = kt_kernel.kt_kernel_ext
    moe_mod = getattr(ext, "moe", None)
    try:
        version = md.version("kt-kernel")
    except md.PackageNotFoundError:
        version = getattr(kt_kernel, "__version__", None)
    return {
        "version": version,
        "variant": kt_kernel.__cpu_variant__,
        "ext_file": getattr(ext, "__file__", None),
        "int8_kernel": getattr(kt_kernel, "__int8_kernel__", None),
        "has_amxint8": moe_mod is not None and hasattr(moe_mod, "AMXInt8_MOE"),
        "has_worker_pool_config": hasattr(ext, "WorkerPoolConfig"),
    }


def make_cpu_infer(ext, threads: int, numa_nodes: list):
    cfg = ext.WorkerPoolConfig()
    pools = len(numa_nodes)
    cfg.subpool_count = pools
    cfg.subpool_numa_map = list(numa_nodes)
    cfg.subpool_thread_count = [threads // pools + (1 if i < threads % pools else 0) for i in range(pools)]
    return ext.CPUInfer(cfg)


def _tasks() -> set:
    return set(os.listdir("/proc/self/task"))


def _cpulist(text: str) -> set:
    cpus = set()
    for part in filter(None, text.strip().split(",")):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _nodes_of(cpus: set) -> list:
    """NUMA nodes (from sysfs) whose CPUs intersect CPUS. Without node folders (a kernel without NUMA, a
    container hiding them) every CPU is node 0, as the cpu probe counts them: the check asked for node 0
    and found no thread allowed there."""
    nodes, seen = [], False
    root = "/sys/devices/system/node"
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if name.startswith("node") and name[4:].isdigit():
            seen = True
            with open(f"{root}/{name}/cpulist") as f:
                if _cpulist(f.read()) & cpus:
                    nodes.append(int(name[4:]))
    return nodes if seen or not cpus else [0]


def _pool_threads(before: set) -> dict:
    """The threads CPUInfer started (read from /proc, not echoed from the request) and the NUMA nodes
    their CPU affinity allows."""
    new = _tasks() - before
    cpus = set()
    for tid in new:
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("Cpus_allowed_list:"):
                        cpus |= _cpulist(line.split(":", 1)[1])
        except FileNotFoundError:  # a thread that ended
            continue
    return {"threads_started": len(new), "allowed_nodes": _nodes_of(cpus)}


def reference(x, ids, w, gate, up, down):
    """Float32 MoE: sum_k w[t,k] * down_e(silu(gate_e x_t) * up_e x_t)."""
    import torch

    out = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32)
    for e in ids.unique().tolist():
        tok, slot = (ids == e).nonzero(as_tuple=True)
        h = x[tok]
        act = torch.nn.functional.silu(h @ gate[e].T) * (h @ up[e].T)
        out.index_add_(0, tok, (act @ down[e].T) * w[tok, slot].unsqueeze(1))
    return out


def rel_err(a, b) -> float:
    import torch

    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def forward(args: dict) -> dict:
    import kt_kernel
    import torch

    ext = kt_kernel.kt_kernel_ext
    experts, topk = args.get("experts", 32), args.get("topk", 4)
    hidden, inter = args.get("hidden", 1024), args.get("intermediate", 512)
    qlens = args.get("qlens", [1, 7, 64])
    torch.manual_seed(args.get("seed", 0))
    t0 = time.perf_counter()
    before = _tasks()
    cpu_infer = make_cpu_infer(ext, args["threads"], args["numa_nodes"])
    pool = _pool_threads(before)
    # Weights scaled so activations stay O(1), as in a trained layer; bf16 is what KT quantizes from.
    gate = (torch.randn(experts, inter, hidden) / hidden**0.5).to(torch.bfloat16).contiguous()
    up = (torch.randn(experts, inter, hidden) / hidden**0.5).to(torch.bfloat16).contiguous()
    down = (torch.randn(experts, hidden, inter) / inter**0.5).to(torch.bfloat16).contiguous()
    gpu_mask = torch.zeros(experts, dtype=torch.bool)
    cfg = ext.moe.MOEConfig(experts, topk, hidden, inter, gpu_mask.data_ptr())
    cfg.max_len = max(qlens)
    cfg.gate_proj, cfg.up_proj, cfg.down_proj = gate.data_ptr(), up.data_ptr(), down.data_ptr()
    cfg.pool = cpu_infer.backend_
    moe = ext.moe.AMXInt8_MOE(cfg)
    phys_to_log = torch.arange(experts, dtype=torch.int64)
    cpu_infer.submit(moe.load_weights_task(phys_to_log.data_ptr()))
    cpu_infer.sync()
    gf, uf, df = gate.float(), up.float(), down.float()
    cases = []
    for qlen in qlens:
        x = torch.randn(qlen, hidden).to(torch.bfloat16).contiguous()
        ids = torch.stack([torch.randperm(experts)[:topk] for _ in range(qlen)]).to(torch.int64).contiguous()
        w = torch.softmax(torch.randn(qlen, topk), dim=-1).to(torch.float32).contiguous()
        # poisoned: every element must be written
        out = torch.full((qlen, hidden), float("nan"), dtype=torch.bfloat16)
        bsz = torch.tensor([qlen], dtype=torch.int32)
        ptrs = (ids.data_ptr(), w.data_ptr(), x.data_ptr(), out.data_ptr())
        task = moe.forward_task(bsz.data_ptr(), topk, *ptrs, False)
        cpu_infer.submit(task)
        cpu_infer.sync()
        ref = reference(x.float(), ids, w, gf, uf, df)
        wrong_ids = ids.roll(1, dims=0) if qlen > 1 else (ids + 1) % experts
        shuffled = reference(x.float(), wrong_ids, w, gf, uf, df)
        cases.append(
            {
                "qlen": qlen,
                "all_finite": bool(torch.isfinite(out).all()),
                "rel_err": rel_err(out.float(), ref),
                "wrong_routing_rel_err": rel_err(out.float(), shuffled),
            }
        )
    return {
        "threads": args["threads"],
        "numa_nodes": args["numa_nodes"],
        **pool,
        "shape": {"experts": experts, "topk": topk, "hidden": hidden, "intermediate": inter},
        "cases": cases,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def main() -> None:
    args = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {"mode": "info"}
    try:  # kt-kernel refuses some hosts at import with a RuntimeError (a library built for a newer CPU ISA
        import kt_kernel  # noqa: F401  than this host's), not an ImportError: reported as its import error
    except Exception as exc:
        print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}"}))
        return
    try:
        result = info() if args["mode"] == "info" else {**info(), "forward": forward(args)}
    except ImportError as exc:
        result = {"import_error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
