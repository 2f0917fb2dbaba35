#!/usr/bin/env bash
# Measure an image build: cold (empty wheelhouse), warm rebuild (same wheelhouse), and a naive
# `pip install` Dockerfile of the same pins from the same base image. Prints one JSON line per step to
# out/measure/<profile>.jsonl; docs/results/image-build.md records the numbers.
# Each image is removed once measured (MEASURE_KEEP_IMAGES=1 keeps them): kt-0.7's 19.5 GB image next to the
# next build's container layer and its commit would need ~60 GB of docker disk.
# The cold build needs an empty wheelhouse: the script empties only one it made (out/measure/wheelhouse, or a
# MEASURE_WHEELHOUSE that did not exist and that out/measure/made-wheelhouses records); another is refused.
# usage: images/scripts/measure.sh [PROFILE] [PLAYBOOK]
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFILE=${1:-kt-0.7}
PLAYBOOK=${2:-playbooks/image.yml}
REPO=${MEASURE_REPO:-image-measure/kt}
WHEELHOUSE=${MEASURE_WHEELHOUSE:-$PWD/out/measure/wheelhouse}
KTINFRA=.venv/bin/ktinfra
mkdir -p out/measure
MADE=out/measure/made-wheelhouses
RESULTS=out/measure/$(basename "$PROFILE" .yaml).jsonl

fail() {  # $1 = what failed, $2 = its exit status, $3 = the file that holds its output
  echo "measure: $1 failed (exit $2); the end of $3:" >&2
  tail -n 20 "$3" >&2
  exit "$2"
}

empty_wheelhouse() {
  if [ ! -e "$WHEELHOUSE" ] && [ ! -L "$WHEELHOUSE" ]; then
    mkdir -p "$WHEELHOUSE"
    realpath "$WHEELHOUSE" >>"$MADE"
  elif [ -d "$WHEELHOUSE" ] && [ -z "$(ls -A "$WHEELHOUSE")" ]; then
    :
  elif [ "$WHEELHOUSE" = "$PWD/out/measure/wheelhouse" ] ||
    { [ -d "$WHEELHOUSE" ] && [ ! -L "$WHEELHOUSE" ] && [ -f "$MADE" ] &&
      grep -qxF "$(realpath "$WHEELHOUSE")" "$MADE"; }; then
    rm -rf "$WHEELHOUSE"
    mkdir -p "$WHEELHOUSE"
  else
    echo "measure: MEASURE_WHEELHOUSE=$WHEELHOUSE is not empty and this script did not make it; the cold" \
      "build needs an empty wheelhouse: name a new directory (it is made) or empty this one" >&2
    exit 2
  fi
}
empty_wheelhouse
: >"$RESULTS"

build() {  # $1 = step name
  local t0 t1 rc=0
  t0=$(date +%s)
  $KTINFRA image build --json --profile "$PROFILE" --playbook "$PLAYBOOK" --repository "$REPO" \
    --wheelhouse "$WHEELHOUSE" --out out/measure/builds >out/measure/manifest-"$1".json \
    2>out/measure/"$1".err || rc=$?
  [ "$rc" = 0 ] || fail "the $1 build" "$rc" out/measure/"$1".err
  t1=$(date +%s)
  .venv/bin/python - "$1" "$((t1 - t0))" out/measure/manifest-"$1".json "$WHEELHOUSE" >>"$RESULTS" <<'PY'
import json, os, sys
step, wall, path, wh = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
m = json.load(open(path))
wh_bytes = sum(os.path.getsize(os.path.join(wh, f)) for f in os.listdir(wh))
print(json.dumps({"step": step, "wall_s": wall, "packer_s": m["build"]["duration_s"], "image": m["image"]["tag"],
                  "image_bytes": m["sizes"]["image_bytes"], "added_bytes": m["sizes"]["added_bytes"],
                  "envs_bytes": m["sizes"]["envs_bytes"], "wheelhouse_bytes": wh_bytes,
                  "pins": len(m["pins"]), "packages": sum(len(e["packages"]) for e in m["envs"].values())}))
PY
  tail -1 "$RESULTS"
  drop "$(.venv/bin/python -c 'import json, sys; print(json.load(open(sys.argv[1]))["image"]["tag"])' \
    out/measure/manifest-"$1".json)"
}

drop() {  # $1 = image tag, removed unless MEASURE_KEEP_IMAGES=1
  [ "${MEASURE_KEEP_IMAGES:-0}" = 1 ] || docker rmi "$1" >/dev/null
}

build cold
build warm

pins() {  # $1 = env role: that env's pins, space separated
  .venv/bin/python -c 'import sys; from ktinfra.image import spec
envs = spec.load(sys.argv[1])["envs"]; print(" ".join(envs.get(sys.argv[2], {}).get("packages") or []))' "$PROFILE" "$1"
}
NAIVE=$REPO:naive-$(basename "$PROFILE" .yaml)
t0=$(date +%s)
rc=0
docker build -q -f images/compare/Dockerfile.naive -t "$NAIVE" \
  --build-arg INFERENCE_PINS="$(pins inference)" --build-arg SFT_PINS="$(pins sft)" images/compare \
  >out/measure/naive.out 2>out/measure/naive.err || rc=$?
[ "$rc" = 0 ] || fail "the naive Dockerfile build" "$rc" out/measure/naive.err
t1=$(date +%s)
size=$(docker image inspect -f '{{.Size}}' "$NAIVE")
echo "{\"step\": \"naive-dockerfile\", \"wall_s\": $((t1 - t0)), \"image_bytes\": $size}" | tee -a "$RESULTS"
drop "$NAIVE"
