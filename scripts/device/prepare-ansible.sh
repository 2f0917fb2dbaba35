#!/usr/bin/env bash
# Fill CHECKOUT/.devcarry-ansible for a provision run on the GPU + AMX host (no network there):
#   site/        ansible-core + its deps for CPython 3.12, unzipped (put on PYTHONPATH)
#   collections/ ansible.posix from this checkout's venv (kt_host_tuning mounts /dev/shm with it)
#   wheelhouse/  ktinfra's deps + setuptools as cp312 wheels: the tool venv and the wheel build install offline
# usage: scripts/device/prepare-ansible.sh [CHECKOUT]; then provision_on_device.sh runs there.
set -euo pipefail
source "$(dirname "$0")/carry.sh"
src=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
checkout=${1:-/work/main}
dest=$checkout/.devcarry-ansible
wheels=$src/.cache/device-ansible-wheels
ANSIBLE=ansible-core==$("$src/.venv/bin/python" -c 'import ansible.release as r; print(r.__version__)')
git -C "$checkout" check-ignore -q .devcarry-ansible/site || { echo "error: .devcarry-ansible is not ignored" >&2; exit 1; }
mkdir -p "$wheels"
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$wheels" \
  "$ANSIBLE" typer rich jinja2 pyyaml requests 'setuptools>=77'
tmp=$(mktemp -d "$checkout/.devcarry-ansible.new.XXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/site" "$tmp/collections/ansible_collections/ansible" "$tmp/wheelhouse"
for w in ansible_core jinja2 markupsafe pyyaml cryptography cffi pycparser packaging resolvelib; do
  unzip -q -o "$wheels"/${w}-*.whl -d "$tmp/site"
done
cp -r "$src"/.venv/lib/python3*/site-packages/ansible_collections/ansible/posix \
  "$tmp/collections/ansible_collections/ansible/"
cp "$wheels"/*.whl "$tmp/wheelhouse/"
rm -f "$tmp"/wheelhouse/ansible_core-*.whl
place_carry "$tmp" "$dest" 60
trap - EXIT
echo "run(carry=[\".devcarry-ansible\"], command=\"bash scripts/device/provision_on_device.sh\")"
