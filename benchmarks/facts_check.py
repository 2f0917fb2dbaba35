"""Does `ktinfra facts` agree with `kt doctor` and with the recorded capture of the same kind of host?

    python benchmarks/facts_check.py --facts live.json --kt-doctor kt-doctor.txt \
        --capture tests/fixtures/hosts/h100-xeon-amx-16c
Prints a markdown table (one row per compared fact) and exits 1 on any disagreement.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

# Facts that legitimately differ between two captures of the same kind of machine.
VOLATILE = {"source", "available_bytes", "uuid", "memory_used_mib", "avail_bytes", "used_bytes", "kernel"}


def doctor_rows(text: str) -> dict[str, str]:
    """kt doctor's rich table as {check: value}, continuation lines joined."""
    rows: dict[str, str] = {}
    last = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) != 3:
            continue
        name, _status, value = cells
        if name:
            last = name
            rows[last] = value
        elif last:
            rows[last] += " " + value
    return rows


def flatten(obj, prefix="") -> dict[str, object]:
    if isinstance(obj, dict):
        return {k: v for key, val in obj.items() for k, v in flatten(val, f"{prefix}{key}.").items()}
    if isinstance(obj, list):
        return {k: v for i, val in enumerate(obj) for k, v in flatten(val, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): obj}


def against_doctor(facts: dict, rows: dict[str, str]) -> list[tuple[str, object, str, bool]]:
    cpu, out = facts["cpu"], []
    m = re.search(r"\((\d+) cores / (\d+) threads\)", rows.get("CPU", ""))
    if m:
        out.append(
            ("cpu.physical_cores", cpu["physical_cores"], m.group(1), cpu["physical_cores"] == int(m[1]))
        )
        out.append(("cpu.logical_cpus", cpu["logical_cpus"], m.group(2), cpu["logical_cpus"] == int(m[2])))
    listed = {
        t.strip().lower().replace("-", "_") for t in re.split(r",|\(", rows.get("CPU Instructions", ""))
    }
    for flag in ("amx_int8", "amx_bf16", "amx_tile", "avx512f", "avx512bw", "avx2"):
        doctor_has = flag in listed or flag.replace("_", "") in listed
        if doctor_has or flag.startswith("amx"):
            out.append(
                (
                    f"cpu.isa.{flag}",
                    cpu["isa"][flag],
                    "listed" if doctor_has else "absent",
                    cpu["isa"][flag] == doctor_has,
                )
            )
    m = re.search(r"(\d+) node", rows.get("NUMA Topology", ""))
    if m:
        out.append(("cpu.numa_nodes", cpu["numa_nodes"], m.group(0), cpu["numa_nodes"] == int(m[1])))
    gpu_text = rows.get("GPU detection", "")
    m = re.search(r"Found (\d+) GPU", gpu_text)
    if m:
        names = [g["name"] for g in facts["gpus"]]
        same = len(names) == int(m[1]) and all(n in gpu_text for n in names)
        out.append(("gpus[].name", names, gpu_text, same))
    cuda = rows.get("CUDA availability", "")
    if cuda:
        mine = (facts.get("nvidia") or {}).get("cuda_version")
        out.append(("nvidia.cuda_version", mine, cuda, mine == cuda))
    m = re.search(r"([\d.]+)GB total", rows.get("System memory", ""))
    if m:
        gib = facts["memory"]["total_bytes"] / 2**30
        out.append(("memory.total_bytes", f"{gib:.1f} GiB", m.group(0), abs(gib - float(m[1])) < 0.2))
    kt = rows.get("kt-kernel", "")
    if kt:
        has_amx = all(cpu["isa"][f] for f in ("amx_tile", "amx_int8", "amx_bf16"))
        out.append(("cpu.isa.amx_* (kt-kernel variant)", has_amx, kt, has_amx == ("(AMX)" in kt)))
    return out


def against_capture(facts: dict, capture: Path) -> list[tuple[str, object, str, bool]]:
    done = subprocess.run(
        [sys.executable, "-m", "ktinfra", "facts", "--from", str(capture), "--json"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:  # before: a CalledProcessError traceback, ktinfra's reason (its stderr) dropped
        reason = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        sys.exit(f"error: --capture {capture}: ktinfra facts --from failed: {reason[0]}")
    recorded = json.loads(done.stdout)
    mine, theirs = flatten(facts), flatten(recorded)
    out = []
    for key in sorted(set(mine) | set(theirs)):
        if key.rsplit(".", 1)[-1] in VOLATILE:
            continue
        if mine.get(key) != theirs.get(key):
            out.append((key, mine.get(key), f"capture: {theirs.get(key)}", False))
    equal = len(set(mine) & set(theirs)) - len(out)
    out.append((f"{equal} other non-volatile keys", "equal", f"capture {capture.name}", True))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=Path, required=True, help="`ktinfra facts --json` of the live host")
    ap.add_argument("--kt-doctor", type=Path, required=True, help="`kt doctor` output on the same host")
    ap.add_argument(
        "--capture", type=Path, action="append", required=True, help="capture folder (repeatable)"
    )
    args = ap.parse_args()
    try:
        facts = json.loads(args.facts.read_text())
        doctor = args.kt_doctor.read_text()
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        name = getattr(exc, "filename", None) or args.facts
        sys.exit(f"error: {name}: {getattr(exc, 'strerror', None) or exc}")
    rows = against_doctor(facts, doctor_rows(doctor))
    for capture in args.capture:
        rows += against_capture(facts, capture)
    print("| fact | ktinfra facts | kt doctor / capture | agree |\n|---|---|---|---|")
    for key, mine, theirs, ok in rows:
        print(f"| {key} | {mine} | {theirs} | {'yes' if ok else '**NO**'} |")
    sys.exit(0 if all(ok for *_, ok in rows) else 1)


if __name__ == "__main__":
    main()
