#!/usr/bin/env bash
# On the GPU + AMX host: does `ktinfra render serve` tell the real converter's outputs apart, and what does
# kt-kernel do with a tree of the other AMX kernel? upstream convert_cpu_weights.py (v0.7.0, carried in
# .devcarry/upstream/) converts a 1-layer random checkpoint with Qwen3-30B-A3B's MoE sizes to INT8 and INT4,
# as layer trees (--no-merge-safetensor) and merged shards, into folders whose names say nothing. Then:
#   - the merged shards' headers (metadata, dtypes, shapes of one expert): can INT8 and INT4 be told apart?
#   - render serve of each tree under BF16, AMXINT8, AMXINT4 and LLAMAFILE plans: rc and the error line;
#   - kt-kernel loading each layer tree with each AMX method against a float32 reference (own process each).
# Needs scripts/device/prepare.sh's .devcarry + .devcarry/upstream/convert_cpu_weights.py.
set -uo pipefail
cd "$(dirname "$0")/../.."
carry=$PWD/.devcarry
out=${OUT:-/tmp/weight-kind-out}
work=${KT_WK_WORK:-/tmp/ktwk}
mkdir -p "$out"
export PYTHONPATH=$PWD:$carry/site PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
log() { echo "$*" | tee -a "$out/summary.txt"; }
rm -rf "$work" && mkdir -p "$work/w"
python3 -m ktinfra plan --model Qwen3-30B-A3B --mode serve --json >"$out/plan-serve.json"
read -r threads pools < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["serve"]; print(s["kt_cpuinfer"], s["kt_threadpool_count"])' "$out/plan-serve.json")
log "plan: kt_method=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serve"]["kt_method"])' "$out/plan-serve.json") kt_cpuinfer=$threads kt_threadpool_count=$pools"
python3 scripts/device/make_moe_checkpoint.py "$work/model" --layers 1 >"$out/checkpoint.json"
# neutral names: a = int8, b = int4
declare -A quant=([tree-a]=int8 [tree-b]=int4 [merged-a]=int8 [merged-b]=int4)
for name in tree-a tree-b merged-a merged-b; do
  extra=(); [[ $name == tree-* ]] && extra=(--no-merge-safetensor)
  s=$(date +%s)
  python3 "$carry/upstream/convert_cpu_weights.py" --input-path "$work/model" --input-type bf16 \
    --output "$work/w/$name" --quant-method "${quant[$name]}" --cpuinfer-threads "$threads" \
    --threadpool-count "$pools" "${extra[@]}" >"$out/convert-$name.out" 2>&1
  rc=$?
  log "convert $name (${quant[$name]}${extra:+, layer tree}): rc=$rc $(( $(date +%s) - s )) s; top: $(ls "$work/w/$name" | head -4 | tr '\n' ' ')"
done
for name in tree-a tree-b; do
  log "$name files: $(find "$work/w/$name/_layer_0" -name '*.kt' | sed 's|.*/||; s/_\(gate\|up\|down\)_.*//' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
done
python3 - "$work/w" >"$out/merged-headers.json" <<'PY'
import json, struct, sys
from pathlib import Path
res = {}
for name in ("merged-a", "merged-b"):
    shards = sorted(Path(sys.argv[1], name).glob("*.safetensors"))
    if not shards:
        res[name] = "no shards"; continue
    with shards[0].open("rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8)); header = json.loads(fh.read(n))
    meta = header.pop("__metadata__", None)
    keys = sorted(k for k in header if k.startswith("blk.0.ffn_up_exps.0."))
    res[name] = {"shards": len(shards), "metadata": meta, "keys": len(header),
                 "expert0_up": {k: [header[k]["dtype"], header[k]["shape"]] for k in keys}}
print(json.dumps(res, indent=1))
PY
log "merged headers: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: (v["metadata"], v["expert0_up"]) if isinstance(v, dict) else v for k, v in d.items()})' "$out/merged-headers.json")"
for name in tree-a tree-b merged-a merged-b; do
  for method in BF16 AMXINT8 AMXINT4 LLAMAFILE; do
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["serve"]["kt_method"]=sys.argv[2]; p["serve"].pop("kt_weight_path", None); json.dump(p, open(sys.argv[3], "w"))' \
      "$out/plan-serve.json" "$method" "$work/plan-$method.json"
    python3 -m ktinfra render serve --plan "$work/plan-$method.json" --name q --model-path "$work/model" \
      --weight-path "$work/w/$name" --out "$work/render-$name-$method" >/dev/null 2>"$work/render.err"
    rc=$?
    log "render $name ${quant[$name]} under $method: rc=$rc $(tail -1 "$work/render.err" | cut -c1-230)"
  done
done
for name in tree-a tree-b; do
  for method in AMXINT8 AMXINT4; do
    timeout 300 python3 scripts/device/convert_check.py --model "$work/model" --weights "$work/w/$name" \
      --method "$method" --threads "$threads" --pools "$pools" >"$work/load.out" 2>"$out/load-$name-$method.err"
    rc=$?
    res=$(grep '^{' "$work/load.out")
    log "load $name (${quant[$name]}) as $method: rc=$rc ${res:-$(grep -E 'Error|error|failed' "$out/load-$name-$method.err" | tail -1 | cut -c1-220)}; 'no such file' lines: $(grep -c 'no such file' "$out/load-$name-$method.err")"
  done
done
# a layer tree split over another pool count than the loader's (kt_threadpool_count)
python3 "$carry/upstream/convert_cpu_weights.py" --input-path "$work/model" --input-type bf16 \
  --output "$work/w/tree-a2" --quant-method int8 --cpuinfer-threads "$threads" --threadpool-count 2 \
  --no-merge-safetensor >"$out/convert-tree-a2.out" 2>&1
log "convert tree-a2 (int8, 2 pools): rc=$? $(ls "$work/w/tree-a2/_layer_0" 2>&1 | tr '\n' ' ')"
for case in "tree-a2 1" "tree-a 2"; do
  set -- $case
  timeout 300 python3 scripts/device/convert_check.py --model "$work/model" --weights "$work/w/$1" \
    --method AMXINT8 --threads "$threads" --pools "$2" >"$work/load.out" 2>"$out/load-$1-pools$2.err"
  rc=$?
  res=$(grep '^{' "$work/load.out")
  log "load $1 with $2 pool(s): rc=$rc ${res:-$(grep -E 'Error|error|failed' "$out/load-$1-pools$2.err" | tail -1 | cut -c1-220)}; 'no such file' lines: $(grep -c 'no such file' "$out/load-$1-pools$2.err")"
done
(cd "$out" && tar -czf logs.tgz --remove-files $(ls | grep -vE '^(summary.txt|merged-headers.json|plan-serve.json)$'))
