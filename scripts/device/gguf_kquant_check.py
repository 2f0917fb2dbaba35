#!/usr/bin/env python3
"""On the device host: kt-kernel's LLAMAFILE backend on GGUF expert tensors in K-quant and IQ types, against
a float32 reference from gguf-py's own dequantizer, and against what ktinfra reads from the same files.

gguf-py quantizes only the legacy types (Q4_0, Q8_0, ...), so each K-/IQ-quant tensor here is written as
random block bytes in the type's ggml layout with its fp16 scale fields set to a small finite value: a valid
tensor of that type (every bit pattern of the other fields decodes), whose exact values gguf-py's
dequantize gives. One MoE layer (qwen3moe tensor names blk.0.ffn_{gate,up,down}_exps.weight; 8 experts,
hidden 512, expert width 768, top-2) is loaded with KTMoEWrapper(method="LLAMAFILE") as SGLang does for
`--kt-method LLAMAFILE`, and its output for 8 tokens is compared with the reference (relative L2).
usage: gguf_kquant_check.py --out FILE.json [--threads N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import gguf
import numpy as np

EXPERTS, HIDDEN, WIDTH, TOPK, TOKENS = 8, 512, 768, 2, 8
# byte offsets of each type's fp16 scale fields in its block (ggml-common.h block_* structs; gguf-py's
# quants.py splits the blocks the same way). IQ1_M (its scale is spread over the block) is left out.
SCALE_FIELDS = {
    "Q8_0": (0,), "Q4_0": (0,),  # controls: types gguf-py writes too, loaded in session 16
    "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
    "IQ4_NL": (0,), "IQ4_XS": (0,), "IQ3_S": (0,), "IQ3_XXS": (0,), "IQ2_S": (0,), "IQ2_XS": (0,),
    "IQ2_XXS": (0,), "IQ1_S": (0,),
}  # fmt: skip
# IQ1_M keeps its fp16 scale in the top nibbles of the four uint16 scales at the block's end (bytes 48-55)
IQ1_M_SCALES = 48
# types gguf-py quantizes itself (from random normal weights): whole-precision, legacy, ternary and MXFP4
QUANTIZED = ("F32", "F16", "BF16", "Q4_1", "Q5_0", "Q5_1", "MXFP4", "TQ1_0", "TQ2_0")
TYPES = (*SCALE_FIELDS, "IQ1_M", *QUANTIZED)
SCALE = np.float16(1 / 512)
WEIGHT_STD = 0.02


def random_blocks(rng: np.random.Generator, qtype: str, rows: int, cols: int) -> np.ndarray:
    """Random blocks whose scale fields are set so the weights' standard deviation is about WEIGHT_STD, as
    in a real checkpoint (every type's values scale with its fp16 fields: d, and dmin where it has one)."""
    kind = gguf.GGMLQuantizationType[qtype]
    block, size = gguf.GGML_QUANT_SIZES[kind]
    raw = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    scale = SCALE
    for _ in range(2):  # once at SCALE, once at the scale that gives WEIGHT_STD
        _set_scale(raw, qtype, scale)
        flat = raw.reshape(rows, cols // block * size)
        scale = np.float16(float(scale) * WEIGHT_STD / float(gguf.quants.dequantize(flat, kind).std()))
    return flat


def _set_scale(raw: np.ndarray, qtype: str, scale: np.float16) -> None:
    if qtype == "IQ1_M":
        bits = int(np.frombuffer(scale.tobytes(), dtype=np.uint16)[0])
        scales = raw[..., IQ1_M_SCALES : IQ1_M_SCALES + 8].copy().view(np.uint16)
        for i in range(4):
            scales[..., i] = (scales[..., i] & 0x0FFF) | (((bits >> (4 * i)) & 0xF) << 12)
        raw[..., IQ1_M_SCALES : IQ1_M_SCALES + 8] = scales.view(np.uint8)
        return
    for offset in SCALE_FIELDS[qtype]:
        raw[..., offset : offset + 2] = np.frombuffer(scale.tobytes(), dtype=np.uint8)


def _tensor(rng: np.random.Generator, qtype: str, rows: int, cols: int) -> np.ndarray:
    """One expert's tensor as the file stores it."""
    if qtype not in QUANTIZED:
        return random_blocks(rng, qtype, rows, cols)
    data = rng.standard_normal((rows, cols), dtype=np.float32) * WEIGHT_STD
    return data if qtype == "F32" else gguf.quants.quantize(data, gguf.GGMLQuantizationType[qtype])


def write_layer(path: Path, qtype: str, seed: int = 0) -> dict:
    """The layer's GGUF file; returns its dequantized float32 weights per projection."""
    kind = gguf.GGMLQuantizationType[qtype]
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    dense = {}
    for proj, rows, cols in (("gate", WIDTH, HIDDEN), ("up", WIDTH, HIDDEN), ("down", HIDDEN, WIDTH)):
        raw = np.stack([_tensor(rng, qtype, rows, cols) for _ in range(EXPERTS)])
        if qtype == "F32":
            writer.add_tensor(f"blk.0.ffn_{proj}_exps.weight", raw)
            dense[proj] = raw
            continue
        writer.add_tensor(f"blk.0.ffn_{proj}_exps.weight", raw, raw_dtype=kind)
        dense[proj] = gguf.quants.dequantize(raw, kind).astype(np.float32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dense


def ktinfra_view(folder: Path) -> dict:
    from ktinfra import gguf_files

    read = gguf_files.read_dir(folder)
    types = sorted({t.type_name for m in read.models for t in m.expert_tensors()})
    return {"reads": types, "ktinfra_refuses": gguf_files.llamafile_failure(types)}


def run_kt_kernel(folder: Path, dense: dict, threads: int, seed: int = 0) -> dict:
    import torch
    from convert_check import cpu_moe, reference  # as the other kernel checks build and judge it

    try:
        print("stage load", flush=True)
        moe = cpu_moe(
            folder, "LLAMAFILE", experts=EXPERTS, topk=TOPK, hidden=HIDDEN, width=WIDTH, threads=threads
        )
        torch.manual_seed(seed)
        x = (torch.randn(TOKENS, HIDDEN) * 0.5).to(torch.bfloat16)
        ids = torch.stack([torch.randperm(EXPERTS)[:TOPK] for _ in range(TOKENS)])
        weights = torch.softmax(torch.randn(TOKENS, TOPK), dim=-1)
        dev = torch.device("cuda")
        stream = torch.cuda.current_stream().cuda_stream
        print("stage forward", flush=True)
        got = moe.forward(x.to(dev), ids.to(dev), weights.float().to(dev), stream)
        torch.cuda.synchronize()
        want = reference({k: torch.from_numpy(v) for k, v in dense.items()}, x.float(), ids, weights)
        rel = float((got.float().cpu() - want).norm() / want.norm())
        return {"load": "ok", "rel_l2": round(rel, 4), "finite": bool(torch.isfinite(got).all())}
    except Exception as exc:  # noqa: BLE001 - reported per type, not hidden
        return {"load": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                "trace": traceback.format_exc(limit=4)}  # fmt: skip


def one_type(qtype: str, threads: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / qtype
        folder.mkdir()
        dense = write_layer(folder / f"tiny-{qtype}.gguf", qtype, seed)
        finite = all(bool(np.isfinite(w).all()) for w in dense.values())
        entry = {"ktinfra": ktinfra_view(folder), "reference_finite": finite}
        entry["kt_kernel"] = run_kt_kernel(folder, dense, threads, seed)
    return entry


def in_child(qtype: str, threads: int, seed: int) -> dict:
    """One type in its own process: kt-kernel aborts the process (std::terminate) on some types."""
    cmd = [sys.executable, __file__, "--one", qtype, "--threads", str(threads), "--seed", str(seed)]
    cmd += ["--out", "-"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    lines = done.stdout.strip().splitlines()
    results = [line for line in lines if line.startswith('{"ktinfra"')]  # kt-kernel prints on stdout too
    if done.returncode == 0 and results:
        return json.loads(results[-1])
    stages = [line.split(" ", 1)[1] for line in lines if line.startswith("stage ")]
    err = [line for line in done.stderr.splitlines() if line.strip() and "UserWarning" not in line]
    return {"kt_kernel": {"load": f"process died, rc {done.returncode}", "last_stage": stages[-1:] or None,
                          "stderr_tail": err[-4:]}}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--one", help="check this type alone, in this process; print its JSON")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--types", default=",".join(TYPES), help="comma-separated (default: all)")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_type(args.one, args.threads, args.seed)), flush=True)
        return
    shape = {"experts": EXPERTS, "hidden": HIDDEN, "width": WIDTH, "topk": TOPK}
    results = {"shape": shape, "seed": args.seed, "types": {}}
    for qtype in args.types.split(","):
        entry = results["types"][qtype] = in_child(qtype, args.threads, args.seed)
        print(qtype, json.dumps({k: v for k, v in entry["kt_kernel"].items() if k != "trace"}), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
