"""STREAM-like memory bandwidth with torch (copy, scale, add, triad, read) over multi-GB float32 arrays.

Counts bytes as STREAM does (copy/scale 2 arrays, add/triad 3, read 1), best of --reps, per thread count.

    python benchmarks/stream.py --gib 2 --threads 1,2,4,8,16 --out stream.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
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


def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value

    return parse


def _thread_counts(text: str) -> list[int]:
    return [_positive(int)(t.strip()) for t in text.split(",")]


def comma_choices(known, noun: str = ""):
    """argparse type: a comma list of `known` names; the first unknown one is refused, naming the known."""
    what = f"{noun} " if noun else ""

    def parse(text: str) -> list[str]:
        items = [item.strip() for item in text.split(",")]
        unknown = [item for item in items if item not in known]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what}{unknown[0]!r} (known: {', '.join(known)})")
        return items

    return parse


def write_json(path: Path, data: object, indent: int | None = 1) -> None:
    """`data` as JSON in `path`, whole or not at all: written beside it, then renamed over it, so a run
    killed or out of disk mid-write leaves the previous results, not a cut-off file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=indent)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as write_text would have made it (mkstemp makes 0600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_out(ap: argparse.ArgumentParser, out: Path) -> None:
    """--out must be a file that can be written in an existing directory: checked before any measuring."""
    parent = out.parent
    if out.is_dir() or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        ap.error(f"--out {out}: not a file in an existing, writable directory")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, all checked before the arrays are allocated and minutes are spent measuring: a bad
    thread count or an --out that cannot be written no longer fails after the runs, losing them."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=_positive(float), default=2.0, help="size of each of the 3 arrays")
    ap.add_argument("--threads", type=_thread_counts, default=[1, 2, 4, 8, 16], help="e.g. 1,2,4,8,16")
    ap.add_argument("--reps", type=_positive(int), default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    check_out(ap, args.out)
    if int(args.gib * 2**30 / 4) < 1:
        ap.error(f"--gib {args.gib:g}: arrays of no float32 element")
    return args


def main() -> None:
    args = parse_args()
    import torch

    n = int(args.gib * 2**30 / 4)
    a, b, c = (torch.full((n,), v, dtype=torch.float32) for v in (1.0, 2.0, 0.0))  # first touch here
    rows = []
    for threads in args.threads:
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
    write_json(args.out, {"array_bytes": n * 4, "rows": rows})


if __name__ == "__main__":
    main()
