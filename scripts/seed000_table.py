#!/usr/bin/env python3
"""Print (or write into docs/planning.md) the seed-000 comparison tables, computed by ktinfra.sizing.

    python scripts/seed000_table.py            # print both tables as markdown
    python scripts/seed000_table.py --write    # replace the generated blocks in docs/planning.md

The reference values below are what the sizing model is *compared* with; the model never reads them.
tests/unit/test_sizing.py fails when docs/planning.md holds tables that differ from this output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktinfra import catalog, sizing  # noqa: E402
from ktinfra.plan.sft import gradient_checkpointing, per_gpu_need  # noqa: E402

GB = 1e9
GIB = 2**30
PLANNING_DOC = ROOT / "docs" / "planning.md"
TOLERANCE = 0.20

# Seed 000 (/work/shared/seeds/000_*.txt, the table before "1. 租用机器"), GB:
# (serve VRAM, serve RAM, SFT VRAM, SFT RAM). Its inference column is headed "KT 推理（≈微调 1/2）".
SEED_000 = {
    "DeepSeek-V2-Lite": (3, 15, 6, 30),
    "Qwen3-30B-A3B": (3, 30, 5, 60),
    "Qwen3-235B-A22B": (9, 225, 18, 450),
    "DeepSeek-V3": (35, 650, 70, 1300),
}
COLUMNS = ("serve_vram", "serve_ram", "sft_vram", "sft_ram")

# Upstream measurements behind (or beside) the seed's SFT column. Each: what was measured, the setting,
# the value in GB, the model's estimate for that same setting (a callable of the architecture), and for GPU
# memory what the model says the GPUs of that run hold beyond it (context and allocator cache included).
KT_GUIDE = "kvcache-ai/ktransformers doc/en/SFT/KTransformers-Fine-Tuning_User-Guide.md"
KT_COOKBOOK = "kvcache-ai/ktransformers doc/en/SFT/KTransformers-Fine-Tuning_Cookbook.md §4"
LEGACY_QLEN = 512  # the guide's measurement setting: GAS=16, qlen=512, LoRA r=8


def legacy_sft(arch, cutoff_len: int = sizing.SFT_CUTOFF_LEN) -> sizing.Estimate:
    """SFT on the legacy stack, with gradient checkpointing as its placement rules leave it."""
    checkpointing, _ = gradient_checkpointing(arch, {"generation": "legacy"})
    return sizing.sft(arch, cutoff_len=cutoff_len, gradient_checkpointing=checkpointing)


def _legacy(arch):
    return legacy_sft(arch, LEGACY_QLEN)


def _on_gpus(est: sizing.Estimate, gpus: int) -> float:
    """All GPUs of a model-parallel run together: the estimate once, each GPU's context and cache."""
    return est.vram_bytes + gpus * sizing.sft_gpu_runtime_bytes(est)


MEASURED = [
    (
        "DeepSeek-V2-Lite",
        "SFT VRAM",
        "legacy stack, 1 GPU, qlen 512, r 8, checkpointing off in code "
        "(guide: benchmark table 6.08 GB; footprint ~5.5 GB)",
        6.08,
        lambda a: _legacy(a).vram_bytes,
        lambda a: _on_gpus(_legacy(a), 1),
        KT_GUIDE,
    ),
    (
        "DeepSeek-V2-Lite",
        "SFT RAM",
        "legacy stack, same run (~30 GB)",
        30,
        lambda a: _legacy(a).ram_bytes,
        None,
        KT_GUIDE,
    ),
    (
        "DeepSeek-V3",
        "SFT VRAM",
        "legacy stack, multi-GPU rule, qlen 512, checkpointing off in code: "
        "measured peak summed over GPUs (~70 GB)",
        70,
        lambda a: _legacy(a).vram_bytes,
        lambda a: _on_gpus(_legacy(a), 2),
        KT_GUIDE,
    ),
    (
        "DeepSeek-V3",
        "SFT RAM",
        "legacy stack, same run (~1.2-1.3 TB)",
        1300,
        lambda a: _legacy(a).ram_bytes,
        None,
        KT_GUIDE,
    ),
    (
        "Qwen3-235B-A22B",
        "SFT VRAM per GPU",
        "current stack, 2 GPUs FSDP2, cutoff 2048, batch 1/GPU: highest single-GPU peak 27.14 GiB",
        27.14 * GIB / GB,
        lambda a: sizing.sft_per_gpu_bytes(sizing.sft(a), 2),
        lambda a: per_gpu_need(sizing.sft(a), 2),
        KT_COOKBOOK,
    ),
    (
        "Qwen3-235B-A22B",
        "SFT RAM",
        "current stack, same run: peak CPU RSS 545.36 GiB",
        545.36 * GIB / GB,
        lambda a: sizing.sft(a).ram_bytes,
        None,
        KT_COOKBOOK,
    ),
]


def estimate(model: str, column: str) -> float:
    """GB at the defaults: serve with AMXINT8 CPU weights next to the BF16 checkpoint of the seed's
    fine-tune-then-serve loop; SFT from BF16 with the default recipe (sizing.sft defaults)."""
    arch = catalog.resolve(model)
    if column.startswith("serve"):
        est = sizing.serve(arch, "AMXINT8", checkpoint_dtype="bf16")
    else:
        est = sizing.sft(arch)
    return (est.vram_bytes if column.endswith("vram") else est.ram_bytes) / GB


def within(model: str, column: str) -> bool:
    table = SEED_000[model][COLUMNS.index(column)]
    return abs(estimate(model, column) - table) <= TOLERANCE * table


def _pct(value: float, reference: float) -> str:
    return f"{(value - reference) / reference * 100:+.0f}%"


def seed_table() -> str:
    lines = [
        "| model | serve VRAM | serve RAM | SFT VRAM | SFT RAM |",
        "|---|---|---|---|---|",
    ]
    inside = 0
    for model, row in SEED_000.items():
        cells = []
        for column, table in zip(COLUMNS, row, strict=True):
            value = estimate(model, column)
            ok = within(model, column)
            inside += ok
            cell = f"{table:g} / {value:.1f} ({_pct(value, table)})"
            cells.append(cell if ok else f"**{cell}**")
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    total = len(SEED_000) * len(COLUMNS)
    lines += ["", f"{inside} of {total} cells within ±{TOLERANCE:.0%} (bold: outside)."]
    legacy = []
    for model, row in SEED_000.items():
        table = row[COLUMNS.index("sft_vram")]
        value = legacy_sft(catalog.resolve(model)).vram_bytes / GB
        legacy.append(f"{model} {table:g} / {value:.1f} ({_pct(value, table)})")
    lines += [
        "",
        "SFT VRAM with the same recipe on the legacy stack (seed 000's `USE_KT=1 llamafactory-cli train`, "
        "gradient checkpointing as its placement rules leave it): " + "; ".join(legacy) + ".",
    ]
    return "\n".join(lines)


def measured_table() -> str:
    lines = [
        "| model | quantity | upstream measurement | measured GB | model GB | model GB on the device "
        "| source |",
        "|---|---|---|---|---|---|---|",
    ]
    for model, quantity, setting, value, model_bytes, device_bytes, source in MEASURED:
        arch = catalog.resolve(model)
        ours = model_bytes(arch) / GB
        estimate_cell = f"{ours:.1f} ({_pct(ours, value)})"
        device_cell = "-"
        if device_bytes:
            device = device_bytes(arch) / GB
            device_cell = f"{device:.1f} ({_pct(device, value)})"
        lines.append(
            f"| {model} | {quantity} | {setting} | {value:.1f} | {estimate_cell} | {device_cell} | {source} |"
        )
    fp8 = sizing.serve(catalog.resolve("Qwen3-235B-A22B"), "AMXINT8", checkpoint_dtype="fp8").vram_bytes / GB
    lines += [
        "",
        f"Not a default, for reference: Qwen3-235B-A22B served from an FP8 GPU checkpoint "
        f"(`Qwen/Qwen3-235B-A22B-FP8`) with AMXINT8 experts would need {fp8:.1f} GB of VRAM.",
    ]
    return "\n".join(lines)


H100_RUNS = ROOT / "docs" / "results" / "2026-11-22-h100-sft-vram"


def h100_reports() -> list[dict]:
    """The reports benchmarks/sft_vram.py wrote on the H100 (the --trace ones are *.json.txt, not these)."""
    import json

    return [json.loads(p.read_text()) for p in sorted(H100_RUNS.glob("*.json"))]


def h100_runs() -> list[tuple[dict, dict]]:
    """(report, run) of every configuration measured on the H100."""
    runs = [(r, run) for r in h100_reports() for run in r["runs"]]
    return sorted(
        runs, key=lambda x: (x[0]["model"], not x[0]["gradient_checkpointing"], x[1].get("batch", 1))
    )


def run_estimate(report: dict, run: dict) -> sizing.Estimate:
    """The model's SFT estimate for one measured configuration."""
    return sizing.sft(
        catalog.resolve(report["model"]),
        cutoff_len=run["seq"],
        batch_size=run.get("batch", 1),
        gradient_checkpointing=report["gradient_checkpointing"],
    )


def h100_table() -> str:
    lines = [
        "| model | checkpointing | batch x length | allocated peak GiB: measured / model | "
        "on the device GiB: measured / model |",
        "|---|---|---|---|---|",
    ]
    for report, run in h100_runs():
        est = run_estimate(report, run)
        device = per_gpu_need(est, 1)
        gc = "on" if report["gradient_checkpointing"] else "off"
        head = f"| {report['model']} | {gc} | {run.get('batch', 1)} x {run['seq']} |"
        if "oom" in run:
            lines.append(
                f"{head} out of memory / {est.vram_bytes / GIB:.1f} | 79.2 (all) / {device / GIB:.1f} |"
            )
            continue
        alloc, used = run["peak_allocated_bytes"], run["device_used_bytes_after"]
        lines.append(
            f"{head} {alloc / GIB:.2f} / {est.vram_bytes / GIB:.2f} ({_pct(est.vram_bytes, alloc)}) | "
            f"{used / GIB:.2f} / {device / GIB:.2f} ({_pct(device, used)}) |"
        )
    return "\n".join(lines)


BLOCKS = {"seed000-table": seed_table, "seed000-measured": measured_table, "sft-h100-measured": h100_table}


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin (scripts/seed000_table.py --write) -->", f"<!-- {name}:end -->"


def replace_blocks(text: str) -> str:
    for name, render in BLOCKS.items():
        begin, end = markers(name)
        head, sep, rest = text.partition(begin)
        _, sep2, tail = rest.partition(end)
        if not sep or not sep2:
            raise SystemExit(f"{PLANNING_DOC}: markers for {name} not found")
        text = f"{head}{begin}\n{render()}\n{end}{tail}"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help="update the generated blocks in docs/planning.md"
    )
    args = parser.parse_args()
    if args.write:
        PLANNING_DOC.write_text(replace_blocks(PLANNING_DOC.read_text()))
    else:
        print(seed_table(), measured_table(), sep="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
