"""Tables for docs/results from moe_threads.json + stream.json: best config per shape, the planner's and
`kt run`'s choices against it, and decode throughput against the memory-bandwidth roofline.

    python benchmarks/analyze.py --moe moe_threads.json --stream stream.json \
        --plan-threads 16 --plan-pools 1 --logical 16
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXPERT_INT8_BYTES = 3 * 2048 * 768  # gate + up + down of one Qwen3-30B-A3B expert, int8
SCALE_BYTES = (768 * 2 + 2048) * 4  # one fp32 scale per output row of the three matrices


def by_config(moe: dict) -> dict:
    """(threads, pools) -> result; runs beside busy processes are keyed (threads, pools, spinners)."""
    out = {}
    for c in moe["configs"]:
        if "shapes" in c:
            key = (c["threads"], c["pools"]) + ((c["spinners"],) if c.get("spinners") else ())
            out[key] = c
    return out


def shape_table(configs: dict) -> list[str]:
    qlens = [s["qlen"] for s in next(iter(configs.values()))["shapes"]]
    head = (
        "| threads | pools | busy neighbours | tiny-layer ms | "
        + " | ".join(f"{q} tok" for q in qlens)
        + " |"
    )
    rows = [head, "|" + "---:|" * (4 + len(qlens))]
    for key, c in sorted(configs.items(), key=lambda kv: (kv[0][1], -kv[0][0], kv[0][2:])):
        tiny = f"{c['tiny_layer_ms']:.2f}" if c.get("tiny_layer_ms") else "-"
        cells = " | ".join(f"{s['tokens_per_s']:,.0f}" for s in c["shapes"])
        rows.append(f"| {key[0]} | {key[1]} | {c.get('spinners', 0)} | {tiny} | {cells} |")
    return rows


def choice_table(configs: dict, plan: tuple[int, int], kt_run: tuple[int, int]) -> list[str]:
    qlens = [s["qlen"] for s in next(iter(configs.values()))["shapes"]]
    rows = [
        "| tokens | best (threads, pools) | best tok/s | planner "
        + f"{plan} % of best | kt run {kt_run} % of best |",
        "|---:|---|---:|---:|---:|",
    ]
    for i, q in enumerate(qlens):
        best_key = max(configs, key=lambda k: configs[k]["shapes"][i]["tokens_per_s"])
        best = configs[best_key]["shapes"][i]["tokens_per_s"]

        def pct(key, i=i, best=best):
            return (
                f"{100 * configs[key]['shapes'][i]['tokens_per_s'] / best:.0f}%" if key in configs else "n/a"
            )

        rows.append(f"| {q} | {best_key} | {best:,.0f} | {pct(plan)} | {pct(kt_run)} |")
    return rows


def roofline_table(configs: dict, bandwidth_gbps: float, keys: list[tuple[int, int]]) -> list[str]:
    rows = [
        "| tokens | unique experts | int8 bytes touched | roofline ms | "
        + " | ".join(f"{k} ms (achieved/roofline)" for k in keys)
        + " |",
        "|---:|---:|---:|---:|" + "---:|" * len(keys),
    ]
    ref = configs[keys[0]]["shapes"]
    for i, shape in enumerate(ref):
        if shape["qlen"] > 16:
            continue
        touched = shape["unique_experts"] * (EXPERT_INT8_BYTES + SCALE_BYTES)
        roof_ms = touched / (bandwidth_gbps * 1e9) * 1e3
        cells = []
        for key in keys:
            ms = configs[key]["shapes"][i]["median_ms"]
            cells.append(f"{ms:.3f} ({roof_ms / ms:.0%})")
        rows.append(
            f"| {shape['qlen']} | {shape['unique_experts']:.1f} | {touched / 1e6:.1f} MB | {roof_ms:.3f} | "
            + " | ".join(cells)
            + " |"
        )
    return rows


def stream_table(stream: dict) -> tuple[list[str], float]:
    kernels = ["copy", "scale", "add", "triad", "read"]
    threads = sorted({r["threads"] for r in stream["rows"]})
    rows = [
        "| threads | " + " | ".join(f"{k} GB/s" for k in kernels) + " |",
        "|---:|" + "---:|" * len(kernels),
    ]
    for t in threads:
        got = {r["kernel"]: r["gbps"] for r in stream["rows"] if r["threads"] == t}
        rows.append(f"| {t} | " + " | ".join(f"{got[k]:.1f}" for k in kernels) + " |")
    best_read = max(r["gbps"] for r in stream["rows"] if r["kernel"] == "read")
    return rows, best_read


def load(path: Path, what: str) -> dict:
    """`path`'s JSON, or the run ends with one clear line (exit 1) naming the file, not a traceback."""
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        sys.exit(f"error: {what} {path}: {getattr(exc, 'strerror', None) or exc}")


def measured(path: Path, what: str) -> dict:
    """by_config of a moe_threads.py result, which must hold at least one config that ran: a file of failed
    configs only (moe_threads.py writes each failure as it comes) has no row to put in a table."""
    data = load(path, what)
    if not isinstance(data, dict) or not isinstance(data.get("configs"), list):
        sys.exit(f"error: {what} {path}: not a moe_threads.py result (no 'configs' list)")
    configs = by_config(data)
    if not configs:
        errors = [c.get("error", "").strip().splitlines()[-1:] for c in data["configs"]]
        first = next((e[0] for e in errors if e), "no config")
        sys.exit(f"error: {what} {path}: none of its {len(data['configs'])} configs ran ({first})")
    return configs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moe", type=Path, required=True)
    ap.add_argument("--stream", type=Path, required=True)
    ap.add_argument("--extra", type=Path, action="append", default=[], help="more runs (repeat, neighbours)")
    ap.add_argument(
        "--plan-threads", type=int, required=True, help="kt_cpuinfer of `ktinfra plan` on the host"
    )
    ap.add_argument("--plan-pools", type=int, required=True, help="kt_threadpool_count of `ktinfra plan`")
    ap.add_argument("--logical", type=int, required=True, help="logical CPUs (kt run default = 0.8 x this)")
    args = ap.parse_args()
    configs = measured(args.moe, "--moe")
    plan = (args.plan_threads, args.plan_pools)
    kt_run = (int(args.logical * 0.8), args.plan_pools)
    stream_rows, bandwidth = stream_table(load(args.stream, "--stream"))
    best_decode = max(configs, key=lambda k: configs[k]["shapes"][0]["tokens_per_s"])
    keys = list(dict.fromkeys([best_decode, plan, kt_run]))
    keys = [k for k in keys if k in configs]
    out = ["### Throughput (tokens/s) per config", "", *shape_table(configs), ""]
    out += [
        "### Planner and `kt run` against the best measured",
        "",
        *choice_table(configs, plan, kt_run),
        "",
    ]
    out += ["### Memory bandwidth (STREAM-like, torch, best of reps)", "", *stream_rows, ""]
    out += [f"### Decode roofline at {bandwidth:.1f} GB/s (best read bandwidth)", ""]
    out += roofline_table(configs, bandwidth, keys)
    for extra in args.extra:
        more = measured(extra, "--extra")
        out += ["", f"### {extra.name}", "", *shape_table(more)]
        plain = {k: v for k, v in more.items() if len(k) == 2}
        if plain:
            out += ["", *choice_table(plain, plan, kt_run)]
    print("\n".join(out))


if __name__ == "__main__":
    main()
