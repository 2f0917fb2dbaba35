"""How long `ktinfra tune` takes to parse a long server log: a synthetic log of --mib MiB, built from the
repository's captured SGLang logs (tests/fixtures/logs: batch lines, OOM tracebacks, restarts), parsed with
ktinfra.tune.parse_text; CPU seconds (the machine's other load counts less than in wall time), best of --reps.

    python benchmarks/tune_parse.py --mib 52 --reps 3
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ktinfra.tune import parse_text

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs"


def synthetic_log(mib: float) -> str:
    """The fixture logs one after another, again and again, until the text is `mib` MiB."""
    parts = [path.read_text() for path in sorted(FIXTURES.glob("*.log"))]
    size, limit, chunks = 0, int(mib * (1 << 20)), []
    while size < limit:
        for part in parts:
            chunks.append(part)
            size += len(part)
    return "".join(chunks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=52.0)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    if not 0 < args.mib <= 4096 or args.reps < 1:
        parser.error("--mib must be in (0, 4096] and --reps at least 1")
    text = synthetic_log(args.mib)
    best = float("inf")
    for _ in range(args.reps):
        start = time.process_time()
        log = parse_text(text)
        best = min(best, time.process_time() - start)
    mib = len(text) / (1 << 20)
    print(f"{mib:.1f} MiB, {log.lines_read} lines: parsed in {best:.2f} s CPU (best of {args.reps})")


if __name__ == "__main__":
    main()
