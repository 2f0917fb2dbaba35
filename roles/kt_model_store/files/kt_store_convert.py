#!/usr/bin/env python3
"""Convert a model's expert weights for the CPU with kt-kernel's convert_cpu_weights.py.

Run on the target by the kt_model_store role. The converter writes into a temporary sibling directory that
is renamed into place only after it exits 0, and a marker is written last; a complete output is skipped.
Free disk (estimated from the input size and the quant method) and /dev/shm are checked before anything
is written. Prints one JSON line.

int8 is written as layer folders (--no-merge-safetensor) finished by `ktinfra weights manifest`: kt-kernel
0.7.2 trains from INT8 experts (and sglang-kt serves a LoRA on them) only as that tree with its
kt-weight-manifest.json and nothing else in the directory, so the marker goes beside it
(.NAME.ktinfra-complete.json). An int8 output of the merged kind (ktinfra before this) is converted again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

MARKER = ".ktinfra-complete.json"
INT8_MANIFEST = "kt-weight-manifest.json"  # ktinfra/int8_weights.py
# a merged output's expert keys (convert_cpu_weights.py without --no-merge-safetensor)
MERGED_EXPERT = re.compile(r"blk\.\d+\.ffn_(?:up|gate|down)_exps\.\d+\.numa\.(\d+)\.weight")
# convert_cpu_weights.py (kt-kernel >= 0.6.4) writes a merged output's layer files to /dev/shm/kt_convert_PID
# and removes that folder only after a conversion that succeeded (close()): one that failed or was killed
# left it there, in RAM (a layer of a large model: GBs), once per attempt
SHM_SCRATCH = re.compile(r"kt_convert_([1-9]\d*)")
# output size relative to a bf16 input, plus headroom for scales and metadata
SIZE_FACTOR = {"int8": 0.55, "int4": 0.3}


def input_bytes(model: Path) -> int:
    return sum(p.stat().st_size for p in model.glob("*.safetensors"))


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def source_of(model: Path) -> dict:
    """What the conversion is made from: the fetch marker's request and file sizes (kt_store_fetch.py writes
    them last), so another repo, revision, file list or local source content makes the conversion due.
    Without a fetch marker (the input was not put there by the fetcher): the input's files with their sizes
    and mtimes."""
    fetched = read_json(model / MARKER)
    if fetched and "request" in fetched:
        made_from = {"request": fetched["request"], "files": fetched.get("files", {})}
        # a local source's sizes and mtimes: its files rewritten in place keep their sizes. Only where the
        # marker has them, so outputs converted before the fetcher recorded them are not converted again
        return made_from | ({"source_files": fetched["source_files"]} if "source_files" in fetched else {})
    files = {}
    for path in sorted(p for p in model.rglob("*") if p.is_file() and p.name != MARKER):
        files[path.relative_to(model).as_posix()] = [path.stat().st_size, path.stat().st_mtime_ns]
    return {"request": None, "files": files}


def converter_of(args: argparse.Namespace) -> dict:
    """The converter script's sha256 and the tag it was cloned at ("" when the user gave the script)."""
    try:
        digest = hashlib.sha256(args.script.read_bytes()).hexdigest()
    except OSError:
        digest = None  # preflight reports the missing script
    return {"sha256": digest, "version": args.converter_version}


LEGACY_KEYS = {"input", "input_type", "quant"}  # the request of a marker written before source/converter


def marker_of(out: Path, quant: str) -> Path:
    """int8: beside the tree, which kt-kernel wants holding nothing but its layers and manifest."""
    return out.with_name(f".{out.name}{MARKER}") if quant == "int8" else out / MARKER


CONVERTED_DTYPES = {"bfloat16": "bf16", "float16": "fp16"}


def native_input_type(model: Path) -> str:
    """The checkpoint's weight dtype as convert_cpu_weights.py's --input-type names it: fp8 checkpoints must
    be dequantized with their weight_scale_inv (read as bf16, their bytes would be quantized as they are).
    Read as ktinfra's catalog reads it (tests/unit/test_kt_store_int8.py holds the two together): a
    multimodal wrapper's text_config, with the quantization_config at the top (Qwen3.5) or inside (Kimi)."""
    config = read_json(model / "config.json") or {}
    text = config.get("text_config")
    if isinstance(text, dict) and "hidden_size" not in config:
        config = {
            **text,
            "quantization_config": config.get("quantization_config") or text.get("quantization_config"),
        }
    quant = config.get("quantization_config") or {}
    method = str(quant.get("quant_method") or "").lower() if isinstance(quant, dict) else ""
    if method == "fp8":
        return "fp8"
    if method:
        raise ValueError(f"{model}: quantization {method} is read in place by kt-kernel, not converted")
    dtype = config.get("torch_dtype") if config.get("torch_dtype") is not None else config.get("dtype")
    dtype = str(dtype or "bfloat16").lower()
    if dtype not in CONVERTED_DTYPES:
        # the converter hands bf16 tensors to kt-kernel as they are: float32 bytes would be read as bf16
        raise ValueError(
            f"{model}: config.json dtype {dtype}: convert_cpu_weights.py quantizes bfloat16, float16 and fp8 "
            "checkpoints; save the model in bfloat16 first"
        )
    return CONVERTED_DTYPES[dtype]


def tree_pools(out: Path) -> int | None:
    """The NUMA pools a converted output is split over: the _numa_M folders holding .kt files in its lowest
    _layer_N, else the numa ids of a merged output's keys (blk.L.ffn_up_exps.E.numa.M.weight); None when
    neither tells."""
    try:
        layers = sorted(
            (int(p.name[7:]), p) for p in out.glob("_layer_*") if p.name[7:].isdigit() and p.is_dir()
        )
        if layers:
            parts = [p for p in layers[0][1].glob("_numa_*") if p.name[6:].isdigit() and p.is_dir()]
            return sum(1 for p in parts if any(p.glob("*.kt"))) or None
        ids = set()
        for shard in sorted(out.glob("*.safetensors")):
            with shard.open("rb") as handle:
                size = int.from_bytes(handle.read(8), "little")
                header = json.loads(handle.read(size)) if 0 < size <= 100_000_000 else {}
            ids.update(int(m.group(1)) for key in header if (m := MERGED_EXPERT.fullmatch(key)))
        return max(ids) + 1 if ids else None
    except (OSError, ValueError, AttributeError):
        return None


def complete(out: Path, request: dict, pools: int = 0) -> bool:
    """A marker written before the request held the source and the converter (ktinfra up to this change) is
    taken when its fields match and it was written after the model's current fetch completed (so it was
    made from these files); it is rewritten with the full request, which later runs compare. `pools` (the
    plan's kt_threadpool_count; 0: not given): an output split over another number is due again, since
    kt-kernel (v0.4.4 as 0.7.2) loads it only with the pools it was converted for."""
    marker_path = marker_of(out, request["quant"])
    marker = read_json(marker_path)
    if not marker or (request["quant"] == "int8" and not (out / INT8_MANIFEST).is_file()):
        return False
    split = tree_pools(out) if pools > 0 else None
    if split is not None and split != pools:
        return False
    if marker.get("request") == request:
        return True
    old = marker.get("request")
    if not isinstance(old, dict) or set(old) != LEGACY_KEYS or old != {k: request[k] for k in LEGACY_KEYS}:
        return False
    fetched = read_json(Path(request["input"]) / MARKER) or {}
    if marker_path.stat().st_mtime < fetched.get("completed_at", float("inf")):
        return False
    marker_path.write_text(json.dumps(marker | {"request": request}))
    return True


def readable_by_all(tree: Path) -> None:
    """The converter writes its shards 0600 (seen with kt-kernel 0.7.2): a serve unit with User= could not
    read them. Weights are not secrets: files 0644, directories 0755."""
    for path in [tree, *tree.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def thread_flags(args: argparse.Namespace) -> list[tuple[str, int]]:
    given = (("--cpuinfer-threads", args.cpuinfer_threads), ("--threadpool-count", args.threadpool_count))
    return [(flag, value) for flag, value in given if value]  # 0 or absent: the converter's default


def disk_bytes(tree: Path) -> int:
    """What a directory tree takes on disk (0 when it is not there)."""
    if not tree.is_dir():
        return 0
    return sum(p.lstat().st_blocks * 512 for p in [tree, *tree.rglob("*")])


def preflight(args: argparse.Namespace, model_bytes: int, leftover: Path) -> list[str]:
    """`leftover`: the temporary output of a conversion that was cut off (killed, the host rebooted); it is
    removed before the converter starts, so its space counts as free."""
    problems = []
    for flag, value in thread_flags(args):
        if value < 0:
            problems.append(f"{flag} must be at least 1 (0: the converter's default), not {value}")
    if model_bytes == 0:
        problems.append(f"no *.safetensors under {args.input_path}: is the model complete?")
    if not args.script.is_file():
        problems.append(f"converter {args.script} not found (set kt_model_store_convert_script)")
    if not shutil.which(args.python):
        problems.append(f"python {args.python} not found or not executable (kt_model_store_convert_python)")
    if args.quant_method == "int8" and not shutil.which(args.ktinfra):
        problems.append(
            f"ktinfra {args.ktinfra} not found: it writes the int8 manifest (kt_preflight's tool)"
        )
    need = int(model_bytes * SIZE_FACTOR[args.quant_method])
    reclaimed = disk_bytes(leftover)
    free = shutil.disk_usage(args.output.parent).free + reclaimed
    if free < need:
        problem = f"needs {need / 2**30:.1f} GiB free under {args.output.parent}, has {free / 2**30:.1f}"
        if reclaimed:
            problem += (
                f" (with the {reclaimed / 2**30:.1f} GiB of {leftover}, left by a conversion that was cut"
                " off and removed before the next one starts)"
            )
        problems.append(problem)
    shm = Path(args.shm_path)
    if args.min_shm_bytes and (not shm.is_dir() or shutil.disk_usage(shm).total < args.min_shm_bytes):
        have = shutil.disk_usage(shm).total if shm.is_dir() else 0
        problems.append(f"{shm} is {have / 2**30:.1f} GiB, converter wants {args.min_shm_bytes / 2**30:.1f}")
    return problems


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_scratch(shm: Path) -> list[str]:
    """Remove the converter's /dev/shm scratch folders (SHM_SCRATCH) whose process is gone; those of a
    conversion still running are kept."""
    removed = []
    for path in sorted(shm.glob("kt_convert_*")) if shm.is_dir() else []:
        found = SHM_SCRATCH.fullmatch(path.name)
        if found and path.is_dir() and not path.is_symlink() and not running(int(found[1])):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


def finish(args: argparse.Namespace, tmp: Path) -> str | None:
    """int8: check the tree and write its manifest (None: done; else why not)."""
    if args.quant_method != "int8":
        return None
    cmd = [args.ktinfra, "weights", "manifest", str(tmp), "--model-path", str(args.input_path), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 0:
        return None
    return f"ktinfra weights manifest: {(proc.stderr.strip() or proc.stdout.strip())[-2000:]}"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="interpreter with kt-kernel installed")
    parser.add_argument("--script", required=True, type=Path, help="path of convert_cpu_weights.py")
    parser.add_argument("--converter-version", default="", help="tag the converter was cloned at, if any")
    parser.add_argument("--input-path", required=True, type=Path)
    parser.add_argument("--input-type", help="bf16 | fp16 | fp8 (default: the model's config.json)")
    parser.add_argument("--ktinfra", default="ktinfra", help="ktinfra, which writes the int8 manifest")
    parser.add_argument("--quant-method", choices=sorted(SIZE_FACTOR), required=True)
    parser.add_argument("--output", required=True, type=Path)
    # the converter's own defaults (60 threads, 2 pools) oversubscribe most hosts: the role passes the plan's
    parser.add_argument("--cpuinfer-threads", type=int, help="serve plan kt_cpuinfer (0: converter default)")
    parser.add_argument("--threadpool-count", type=int, help="serve plan's kt_threadpool_count (0: default)")
    parser.add_argument("--min-shm-bytes", type=int, default=0)
    parser.add_argument("--shm-path", default="/dev/shm")
    parser.add_argument("--dry-run", action="store_true", help="check only, print the converter command")
    parser.add_argument("--check", action="store_true", help="only say if the output is complete (3: not)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
        args.input_type = args.input_type or native_input_type(args.input_path)
    except ValueError as exc:
        print(json.dumps({"changed": False, "complete": False, "problems": [str(exc)]}))
        return 1
    request = {"input": str(args.input_path), "input_type": args.input_type, "quant": args.quant_method,
               "source": source_of(args.input_path), "converter": converter_of(args)}  # fmt: skip
    if complete(args.output, request, args.threadpool_count or 0):
        print(json.dumps({"changed": False, "complete": True, "output": str(args.output)}))
        return 0
    if args.check:
        print(json.dumps({"changed": False, "complete": False, "output": str(args.output)}))
        return 3
    tmp = args.output.with_name(f".{args.output.name}.tmp-ktinfra")
    problems = preflight(args, input_bytes(args.input_path), tmp)
    cmd = [args.python, str(args.script), "--input-path", str(args.input_path), "--input-type",
           args.input_type, "--output", str(tmp), "--quant-method", args.quant_method]  # fmt: skip
    for flag, value in thread_flags(args):
        cmd += [flag, str(value)]
    if args.quant_method == "int8":
        cmd.append("--no-merge-safetensor")
    if problems or args.dry_run:
        print(json.dumps({"changed": False, "complete": False, "problems": problems, "command": cmd}))
        return 1 if problems else 0
    shutil.rmtree(tmp, ignore_errors=True)
    remove_stale_scratch(Path(args.shm_path))  # left by conversions that failed or were killed
    started = time.time()
    proc = subprocess.run(cmd, cwd=args.script.parent.parent)
    remove_stale_scratch(Path(args.shm_path))  # this one's, where it failed
    error = f"converter exited {proc.returncode}" if proc.returncode else finish(args, tmp)
    if error:
        shutil.rmtree(tmp, ignore_errors=True)
        print(json.dumps({"changed": False, "complete": False, "error": error}))
        return 1
    readable_by_all(tmp)
    record = json.dumps({"request": request, "seconds": round(time.time() - started)})
    marker = marker_of(args.output, args.quant_method)
    if args.quant_method == "int8":
        marker.unlink(missing_ok=True)  # beside the output it describes: gone before that output is
    else:
        (tmp / MARKER).write_text(record)  # renamed into place with the tree
    if args.output.exists():
        shutil.rmtree(args.output)
    os.replace(tmp, args.output)
    if args.quant_method == "int8":
        marker.write_text(record)
    print(json.dumps({"changed": True, "complete": True, "output": str(args.output)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
