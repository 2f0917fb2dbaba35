#!/usr/bin/env bash
# On the GPU + AMX host (no network, not systemd as PID 1): playbooks/provision.yml --tags preflight,tuning
# with the local inventory, three times:
#   A  serve + sft requests: the SFT plan is infeasible there (disk) -> preflight must fail, host unchanged
#   B  serve request only: preflight passes, kt_host_tuning applies what it can, writes its report
#   C  the same again: idempotence, changed=0
# Needs .devcarry-ansible from scripts/device/prepare-ansible.sh. Logs and snapshots go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
carry=$PWD/.devcarry-ansible
out=${OUT:-/tmp/provision-out}
mkdir -p "$out"
export PYTHONPATH=$carry/site ANSIBLE_COLLECTIONS_PATH=$carry/collections ANSIBLE_CONFIG=$PWD/ansible.cfg
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$carry/wheelhouse ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
py=/usr/bin/python3
venv_py=
for p in /usr/bin/python3 $(which -a python3 python3.12 2>/dev/null); do
  if "$p" -c 'import ensurepip, venv' 2>/dev/null; then venv_py=$p; break; fi
done
{
  echo "id: $(id)"; echo "python: $($py -V 2>&1) ; venv-capable: ${venv_py:-none}"
  uname -r; cat /proc/1/comm
} | tee "$out/host.txt"
[ -n "$venv_py" ] || { echo "no python with ensurepip+venv here" | tee -a "$out/host.txt"; exit 1; }
extra=(-e "kt_preflight_python=$venv_py" -e "kt_preflight_wheelhouse=$carry/wheelhouse" ${KT_PROVISION_EXTRA:-})
[ "$(id -u)" = 0 ] && extra+=(-e ansible_become=false)
snapshot() { # NAME
  {
    for f in /proc/sys/kernel/numa_balancing /proc/sys/vm/swappiness /sys/kernel/mm/transparent_hugepage/enabled; do
      printf '%s: %s\n' "$f" "$(cat "$f" 2>&1)"
    done
    df -h /dev/shm | tail -1
    ls -d /opt/ktinfra /opt/ktinfra/tool /etc/sysctl.d/90-ktinfra.conf /var/lib/ktinfra/tuning.json 2>&1
  } >"$out/snapshot-$1.txt"
}
playbook() { # NAME REQUESTS_JSON
  local name=$1 start rc
  start=$(date +%s)
  $py -c 'import sys; from ansible.cli.playbook import main; sys.argv[0] = "ansible-playbook"; main()' \
    playbooks/provision.yml -i inventories/local/hosts --tags preflight,tuning "${extra[@]}" \
    -e "{\"kt_preflight_requests\": $2}" >"$out/run-$name.log" 2>&1
  rc=$?
  echo "run $name: rc=$rc, $(( $(date +%s) - start )) s, $(grep -oE 'ok=[0-9]+ +changed=[0-9]+ +unreachable=[0-9]+ +failed=[0-9]+' "$out/run-$name.log" | tail -1)" \
    | tee -a "$out/summary.txt"
  snapshot "$name"
}
snapshot before
playbook A-serve-sft '[{"model": "Qwen3-30B-A3B", "mode": "serve"}, {"model": "Qwen3-30B-A3B", "mode": "sft"}]'
grep -E 'needs|has [0-9.]+ GB|problem' "$out/run-A-serve-sft.log" | head -8 | tee -a "$out/summary.txt"
playbook B-serve '[{"model": "Qwen3-30B-A3B", "mode": "serve"}]'
playbook C-serve-again '[{"model": "Qwen3-30B-A3B", "mode": "serve"}]'
cp /var/lib/ktinfra/tuning.json "$out/" 2>/dev/null
cp /etc/sysctl.d/90-ktinfra.conf "$out/" 2>/dev/null
find /opt/ktinfra /etc/ktinfra /var/lib/ktinfra -maxdepth 2 2>/dev/null | head -40 >"$out/files.txt"
for f in /etc/ktinfra/*.json /var/lib/ktinfra/*.json; do [ -f "$f" ] && cp "$f" "$out/" ; done 2>/dev/null
cat "$out/summary.txt"
