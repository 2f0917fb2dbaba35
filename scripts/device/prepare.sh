#!/usr/bin/env bash
# Prepare the folder the device tool carries to the GPU + AMX host (no network there), then print the exact
# `run` call(s). The tool sends the checkout its session started in (default /work/main) plus the ignored
# paths named in `carry`; this fills CHECKOUT/.devcarry with:
#   site/  kt-kernel 0.7.2 cp312 (kt_kernel/, kt_kernel.libs/, dist-info only), gguf, pytest-testinfra
#   repo/  this worktree's tracked + untracked-not-ignored files (ktinfra, tests/infra, benchmarks, scripts)
# usage: scripts/device/prepare.sh [CHECKOUT]
set -euo pipefail
source "$(dirname "$0")/carry.sh"
src=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
checkout=${1:-/work/main}
dest=$checkout/.devcarry
wheels=${KT_DEVICE_WHEELS:-$src/.cache/device-wheels}
KT_KERNEL=kt-kernel==0.7.2
PURE=(gguf==0.19.0 pytest-testinfra==10.2.2)

git -C "$checkout" check-ignore -q .devcarry/site || { echo "error: .devcarry is not ignored in $checkout" >&2; exit 1; }
mkdir -p "$wheels"
if ! ls "$wheels"/kt_kernel-0.7.2-cp312-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_35_x86_64 -d "$wheels" "$KT_KERNEL"
fi
for spec in "${PURE[@]}"; do
  name=${spec%%==*}; ver=${spec##*==}
  ls "$wheels/${name//-/_}-$ver-"*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps -d "$wheels" "$spec"
done

tmp=$(mktemp -d "$checkout/.devcarry.new.XXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/site" "$tmp/repo"
unzip -q "$wheels"/kt_kernel-0.7.2-cp312-*.whl 'kt_kernel/*' 'kt_kernel.libs/*' 'kt_kernel-0.7.2.dist-info/*' \
  -d "$tmp/site"
for whl in "$wheels"/gguf-*.whl "$wheels"/pytest_testinfra-*.whl; do unzip -q -o "$whl" -d "$tmp/site"; done
(cd "$src" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$tmp/repo"

place_carry "$tmp" "$dest" 60
trap - EXIT
cat <<CALL
device tool call (run from the session that owns $checkout):
  run(carry=[".devcarry"], timeout_s=600, command="bash .devcarry/repo/scripts/device/on_device.sh PHASES")
PHASES: any of info capture suite doctor stream moe-quick moe (default: all but moe-quick)
CALL
