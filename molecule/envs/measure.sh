#!/usr/bin/env bash
# One measured run of the envs scenario: cold converge (empty wheelhouse), idempotence, verify, env sizes;
# then a fresh container converged from the now warm wheelhouse, and its idempotence.
# Usage: molecule/envs/measure.sh [EMPTY_WHEELHOUSE_DIR]   (results: out/roles1-envs-measure.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PWD/.venv/bin:$PATH
export DOCKER_TIMEOUT=${DOCKER_TIMEOUT:-900}
# per-task wall times in the log (where a converge spends its time)
export ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks PROFILE_TASKS_TASK_OUTPUT_LIMIT=12
export KTINFRA_WHEELHOUSE=${1:-/var/cache/ktinfra/cold-$(date +%s)}
mkdir -p "$KTINFRA_WHEELHOUSE" out
[ -z "$(ls -A "$KTINFRA_WHEELHOUSE")" ] || { echo "measure: $KTINFRA_WHEELHOUSE is not empty" >&2; exit 1; }
result=out/roles1-envs-measure.txt
log=out/roles1-envs-measure.log
: >"$log"
recap() { sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -oE 'ok=[0-9]+ +changed=[0-9]+' | tail -1; }
# removing a container with ~20 GB of envs can outlast the docker driver's 60 s timeout: retry
destroy() { molecule destroy -s envs >>"$log" 2>&1 || { sleep 60; molecule destroy -s envs >>"$log" 2>&1; }; }
timed() { # NAME molecule-args...
  local name=$1 start rc=0
  shift
  start=$(date +%s)
  molecule "$@" -s envs >>"$log" 2>&1 || rc=$?
  echo "$name: $(($(date +%s) - start)) s, rc=$rc, $(recap)" | tee -a "$result"
  return $rc
}
{ echo "== envs measure $(date -u +%FT%TZ) on $(nproc) cores, wheelhouse $KTINFRA_WHEELHOUSE"; } | tee "$result"
destroy
molecule create -s envs >>"$log" 2>&1
timed cold-converge converge
timed cold-idempotence idempotence || true
timed verify verify || true
docker exec roles1-envs sh -c 'du -sb /opt/kt/envs/* /opt/ktinfra/tool' | tee -a "$result"
echo "wheelhouse: $(du -sb "$KTINFRA_WHEELHOUSE" | cut -f1) bytes, $(ls "$KTINFRA_WHEELHOUSE" | wc -l) files" | tee -a "$result"
destroy
molecule create -s envs >>"$log" 2>&1
timed warm-converge converge
timed warm-idempotence idempotence || true
timed warm-verify verify || true
echo "container roles1-envs left running for 'molecule verify -s envs'; destroy with 'molecule destroy -s envs'" | tee -a "$result"
