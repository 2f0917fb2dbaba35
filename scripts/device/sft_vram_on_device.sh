#!/usr/bin/env bash
# Runs ON the device host, from the root of the checkout the device tool sent, with .whl carried (the peft
# wheel: the host has torch and transformers but not peft). One process per model and mode, so each peak is
# its own; nvidia-smi samples the GPU's used memory every 100 ms beside each (what upstream guides report).
# Results in $OUT: one JSON per run (benchmarks/sft_vram.py), smi.csv, log.txt.
#   here:   mkdir -p .whl && python3 -m pip download --no-deps --only-binary=:all: -d .whl peft==0.21.2
#   device: run(carry=[".whl"], command="bash scripts/device/sft_vram_on_device.sh [lengths|batches]")
set -u
out=${OUT:-/tmp/sft-vram-out}
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 TOKENIZERS_PARALLELISM=false
python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__)'
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

measure() {  # name model [args...]
  local name=$1 model=$2; shift 2
  echo "# $name" >>"$out/smi.csv"
  nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 100 >>"$out/smi.csv" &
  local smi=$!
  local start=$SECONDS
  python3 benchmarks/sft_vram.py --model "$model" --out "$out/$name.json" "$@" 2> >(grep -v -i warn >&2)
  echo "$name rc=$? $((SECONDS - start)) s"
  kill $smi; wait $smi 2>/dev/null
}

if [ "${1:-lengths}" = lengths ]; then
  measure q30 Qwen3-30B-A3B --seq 512,1024,2048
  measure q235 Qwen3-235B-A22B --seq 512,1024,2048
  measure v2l DeepSeek-V2-Lite --seq 512,1024,2048
  measure v2l-nockpt DeepSeek-V2-Lite --no-checkpointing --seq 512,1024,2048
  measure v3 DeepSeek-V3 --seq 512,1024,2048
  measure v3-nockpt DeepSeek-V3 --no-checkpointing --seq 512,1024,2048
else  # the planner's micro-batch choice: tokens = batch x length
  measure q30-b2 Qwen3-30B-A3B --batch 2 --seq 512,1024,2048
  measure q30-b4 Qwen3-30B-A3B --batch 4 --seq 512,1024,2048
  measure v2l-b4 DeepSeek-V2-Lite --batch 4 --seq 1024,2048
  measure v3-b4 DeepSeek-V3 --batch 4 --seq 1024,2048
fi
