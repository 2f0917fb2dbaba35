#!/usr/bin/env bash
# On a lent multi-GPU host (nvidia-h200-x2, -x4): CUDA_VISIBLE_DEVICES as the capture, facts, plan and the host
# suite's GPU helpers see it, on real GPUs instead of synthetic captures. Writes $OUT/multi-gpu.json and
# $OUT/captures.tgz (a capture as is and one under CUDA_VISIBLE_DEVICES=1).
# usage (device tool): bash scripts/device/multi_gpu_check.sh   (PYTHONPATH holds .devcarry/site and the repo)
set -uo pipefail
out=${OUT:-/tmp/multi-gpu-out}
work=$(mktemp -d)
mkdir -p "$out"
uuid0=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | sed -n 1p)
facts() { python3 -m ktinfra facts --json 2>/dev/null; }
plan() { python3 -m ktinfra plan --model Qwen3-30B-A3B --mode serve --json 2>/dev/null; }
summary() {  # label, then the env assignments to run under
  local label=$1; shift
  env "$@" python3 - "$label" <<'PY'
import json, subprocess, sys
run = lambda *a: json.loads(subprocess.run([sys.executable, "-m", "ktinfra", *a, "--json"],
                                           capture_output=True, text=True).stdout or "null")
f = run("facts")
keys = ("kt_method", "gpu_indices", "tensor_parallel_size", "kt_num_gpu_experts", "mem_fraction_static",
        "kt_cpuinfer", "max_running_requests")
plans = {}
for model in ("Qwen3-30B-A3B", "Qwen3-235B-A22B"):
    p = run("plan", "--model", model, "--mode", "serve") or {}
    s = p.get("serve") or {}
    plans[model] = {"serve": {k: s.get(k) for k in keys}, "feasible": p.get("feasible"),
                    "problems": p.get("problems"), "warnings": p.get("warnings")}
print(json.dumps({"case": sys.argv[1], "gpus": [(g["index"], g.get("uuid")) for g in f["gpus"]],
                  "cuda_visible_devices": f.get("cuda_visible_devices"),
                  "memory_total_bytes": f["memory"]["total_bytes"], "plans": plans}))
PY
}
{
  summary as-is
  summary cvd-1 CUDA_VISIBLE_DEVICES=1
  summary cvd-uuid0 CUDA_VISIBLE_DEVICES="$uuid0"
  summary cvd-empty CUDA_VISIBLE_DEVICES=
  [ "$(nvidia-smi -L | wc -l)" -ge 4 ] && summary cvd-2-3 CUDA_VISIBLE_DEVICES=2,3
} > "$work/cases.jsonl"
python3 scripts/device/gpu_checks.py > "$work/gpu_checks.json" 2>"$work/gpu_checks.err"
python3 -m ktinfra facts --capture "$work/cap-all" >/dev/null 2>&1
CUDA_VISIBLE_DEVICES=1 python3 -m ktinfra facts --capture "$work/cap-cvd1" >/dev/null 2>&1
python3 - "$work" "$out/multi-gpu.json" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
doc = {"cases": [json.loads(l) for l in (work / "cases.jsonl").read_text().splitlines() if l.strip()]}
try:
    doc["gpu_checks"] = json.loads((work / "gpu_checks.json").read_text())
except ValueError:
    doc["gpu_checks_error"] = (work / "gpu_checks.err").read_text()[-2000:]
pathlib.Path(sys.argv[2]).write_text(json.dumps(doc, indent=1))
PY
tar -C "$work" -czf "$out/captures.tgz" cap-all cap-cvd1
cat "$out/multi-gpu.json"
