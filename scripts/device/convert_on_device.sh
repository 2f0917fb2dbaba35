#!/usr/bin/env bash
# On the GPU + AMX host: kt-kernel's convert_cpu_weights.py (upstream source at the profile's tag, carried in
# .devcarry/upstream/, since no wheel ships it) run through the kt_model_store role's wrapper
# roles/kt_model_store/files/kt_store_convert.py, on a random checkpoint with Qwen3-30B-A3B's MoE layer sizes,
# with the threads `ktinfra plan` picks for this host. Then: re-run (complete -> not run again), an
# interrupted run (nothing marked complete, re-run converts), and the converted weights loaded by kt-kernel
# against a float32 reference. int8 is the layer tree (--no-merge-safetensor) finished by `ktinfra weights
# manifest`: kt-kernel's own validator and its INT8_SFT loader are run on it, and on a merged conversion (the
# converter's default, what ktinfra wrote before) for comparison (scripts/device/int8_sft_check.py).
# Needs scripts/device/prepare.sh's .devcarry + .devcarry/upstream.
set -uo pipefail
cd "$(dirname "$0")/../.."
carry=$PWD/.devcarry
out=${OUT:-/tmp/convert-out}
work=${KT_CONVERT_WORK:-/tmp/ktconv}
layers=${KT_CONVERT_LAYERS:-2}
mkdir -p "$out"
export PYTHONPATH=$PWD:$carry/site PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
log() { echo "$*" | tee -a "$out/summary.txt"; }
secs() { local ms=$(( ($(date +%s%N) - $1) / 1000000 )); printf '%d.%03d' $((ms / 1000)) $((ms % 1000)); }
rm -rf "$work" && mkdir -p "$work/cpu-weights" "$work/bin"
# the wrapper runs ktinfra (kt_preflight's tool on a real host); here the checkout on PYTHONPATH
printf '#!/bin/sh\nexec python3 -m ktinfra "$@"\n' >"$work/bin/ktinfra" && chmod +x "$work/bin/ktinfra"
python3 -c 'import torch, triton, numpy, kt_kernel; print("torch", torch.__version__, "triton", triton.__version__, "kt_kernel", getattr(kt_kernel, "__version__", "?"))' 2>&1 | tail -1 | tee -a "$out/summary.txt"
python3 -m ktinfra plan --model Qwen3-30B-A3B --mode serve --json >"$out/plan-serve.json"
threads=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serve"]["kt_cpuinfer"])' "$out/plan-serve.json")
pools=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serve"]["kt_threadpool_count"])' "$out/plan-serve.json")
log "plan: kt_cpuinfer=$threads kt_threadpool_count=$pools"
start=$(date +%s%N)
python3 scripts/device/make_moe_checkpoint.py "$work/model" --layers "$layers" >"$out/checkpoint.json"
log "checkpoint: $layers layers x 128 experts at 2048/768, $(du -sh "$work/model" | cut -f1), $(secs "$start") s"
convert() { # NAME extra...
  local name=$1 s rc
  shift
  s=$(date +%s%N)
  python3 roles/kt_model_store/files/kt_store_convert.py --python python3 --script "$carry/upstream/convert_cpu_weights.py" \
    --input-path "$work/model" --quant-method int8 --output "$work/cpu-weights/moe-INT8" \
    --cpuinfer-threads "$threads" --threadpool-count "$pools" --min-shm-bytes 2147483648 \
    --ktinfra "$work/bin/ktinfra" "$@" \
    >"$out/convert-$name.out" 2>"$out/convert-$name.err"
  rc=$?
  log "convert $name: rc=$rc $(secs "$s") s $(tail -1 "$out/convert-$name.out")"
}
convert first
{ ls -la "$work/cpu-weights" "$work/cpu-weights/moe-INT8" "$work/cpu-weights/moe-INT8/_layer_0"
  find "$work/cpu-weights/moe-INT8/_layer_0" -type f | sort | head -8
  head -c 600 "$work/cpu-weights/moe-INT8/kt-weight-manifest.json"; echo; } >"$out/layout.txt" 2>&1
log "tree: $(find "$work/cpu-weights/moe-INT8" -name '*.kt' | wc -l) .kt files, $(du -sh "$work/cpu-weights/moe-INT8" | cut -f1)"
log "marker beside: $(ls -A "$work/cpu-weights" | tr '\n' ' ')"
s=$(date +%s%N)
python3 -m ktinfra weights check "$work/cpu-weights/moe-INT8" --model-path "$work/model" --json >"$out/weights-check.json"
log "ktinfra weights check rc=$? $(secs "$s") s $(cat "$out/weights-check.json")"
convert again
# what the converter writes by default (and ktinfra did before): merged shards
s=$(date +%s%N)
python3 "$carry/upstream/convert_cpu_weights.py" --input-path "$work/model" --input-type bf16 \
  --output "$work/cpu-weights/merged-INT8" --quant-method int8 --cpuinfer-threads "$threads" \
  --threadpool-count "$pools" >"$out/convert-merged.out" 2>"$out/convert-merged.err"
log "merged conversion rc=$? $(secs "$s") s: $(ls "$work/cpu-weights/merged-INT8" | head -3 | tr '\n' ' ')"
python3 scripts/device/int8_sft_check.py --model "$work/model" --weights "$work/cpu-weights/moe-INT8" \
  --weights "$work/cpu-weights/merged-INT8" --threads "$threads" --pools "$pools" >"$out/sft-check.json" \
  2>"$out/sft-check.err"
log "sft check rc=$? $(cat "$out/sft-check.json")"
python3 scripts/device/convert_check.py --model "$work/model" --weights "$work/cpu-weights/moe-INT8" \
  --threads "$threads" --pools "$pools" >"$out/check.json" 2>"$out/check.err"
log "check rc=$? $(cat "$out/check.json")"
# interrupted: remove the finished output, start again, kill the wrapper and its converter mid-way
rm -rf "$work/cpu-weights/moe-INT8"
setsid python3 roles/kt_model_store/files/kt_store_convert.py --python python3 \
  --script "$carry/upstream/convert_cpu_weights.py" --input-path "$work/model" --quant-method int8 \
  --output "$work/cpu-weights/moe-INT8" --cpuinfer-threads "$threads" --threadpool-count "$pools" \
  --ktinfra "$work/bin/ktinfra" >"$out/convert-killed.out" 2>"$out/convert-killed.err" &
pid=$!
sleep "${KT_CONVERT_KILL_AFTER:-4}"
kill -9 -- -"$pid" 2>/dev/null
wait "$pid" 2>/dev/null
log "killed after ${KT_CONVERT_KILL_AFTER:-4} s: $(ls -A "$work/cpu-weights" | tr '\n' ' ')"
# the marker beside the removed output stays (a user's rm -r of the output): no manifest, so not complete
log "manifests left: $(find "$work/cpu-weights" -name kt-weight-manifest.json | grep -vc merged-INT8)"
convert after-kill
log "after re-run: $(ls -A "$work/cpu-weights" | tr '\n' ' ')"
# the tool brings back 16 files by name: keep the summary, the check and the plan loose, the rest in one tarball
(cd "$out" && tar -czf logs.tgz --remove-files $(ls | grep -vE '^(summary.txt|check.json|sft-check.json|weights-check.json|plan-serve.json|layout.txt)$'))
