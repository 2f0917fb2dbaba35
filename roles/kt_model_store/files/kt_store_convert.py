#!/usr/bin/env python3
"""Convert a model's expert weights for the CPU with kt-kernel's convert_cpu_weights.py.

Run on the target by the kt_model_store role. The converter writes into a temporary sibling directory that
is renamed into place only after it exits 0, and a marker is written last; a complete output is skipped.
Free disk (estimated from the input size and the quant method) and /dev/shm are checked before anything
is written. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

MARKER = ".ktinfra-complete.json"
# output size relative to a bf16 input, plus headroom for scales and metadata
SIZE_FACTOR = {"int8": 0.55, "int4": 0.3}


def input_bytes(model: Path) -> int:
    return sum(p.stat().st_size for p in model.glob("*.safetensors"))


def complete(out: Path, request: dict) -> bool:
    try:
        marker = json.loads((out / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker.get("request") == request


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


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="interpreter with kt-kernel installed")
    parser.add_argument("--script", required=True, type=Path, help="path of convert_cpu_weights.py")
    parser.add_argument("--input-path", required=True, type=Path)
    parser.add_argument("--input-type", default="bf16")
    parser.add_argument("--quant-method", choices=sorted(SIZE_FACTOR), required=True)
    parser.add_argument("--output", required=True, type=Path)
    # the converter's own defaults (60 threads, 2 pools) oversubscribe most hosts: the role passes the plan's
    parser.add_argument("--cpuinfer-threads", type=int, help="serve plan kt_cpuinfer (0: converter default)")
    parser.add_argument("--threadpool-count", type=int, help="serve plan's kt_threadpool_count (0: default)")
    parser.add_argument("--min-shm-bytes", type=int, default=0)
    parser.add_argument("--shm-path", default="/dev/shm")
    parser.add_argument("--dry-run", action="store_true", help="check only, print the converter command")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    request = {"input": str(args.input_path), "input_type": args.input_type, "quant": args.quant_method}
    if complete(args.output, request):
        print(json.dumps({"changed": False, "complete": True, "output": str(args.output)}))
        return 0
    tmp = args.output.with_name(f".{args.output.name}.tmp-ktinfra")
    problems = preflight(args, input_bytes(args.input_path), tmp)
    cmd = [args.python, str(args.script), "--input-path", str(args.input_path), "--input-type",
           args.input_type, "--output", str(tmp), "--quant-method", args.quant_method]  # fmt: skip
    for flag, value in thread_flags(args):
        cmd += [flag, str(value)]
    if problems or args.dry_run:
        print(json.dumps({"changed": False, "complete": False, "problems": problems, "command": cmd}))
        return 1 if problems else 0
    shutil.rmtree(tmp, ignore_errors=True)
    started = time.time()
    proc = subprocess.run(cmd, cwd=args.script.parent.parent)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        print(
            json.dumps({"changed": False, "complete": False, "error": f"converter exited {proc.returncode}"})
        )
        return 1
    readable_by_all(tmp)
    (tmp / MARKER).write_text(json.dumps({"request": request, "seconds": round(time.time() - started)}))
    if args.output.exists():
        shutil.rmtree(args.output)
    os.replace(tmp, args.output)
    print(json.dumps({"changed": True, "complete": True, "output": str(args.output)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
