#!/usr/bin/env bash
# Run `make test`'s stages in lanes at once: each lane is a list of make goals run one after the other
# (a make -j1 each); the lanes run side by side. Why: serially the stages took 107 min on a 2-core VM of 2026-11
# (CI allows 90): the unit suite keeps both cores busy for 28 min, while the container stages wait on
# docker, pip and systemd with one core mostly idle.
# Each output line is prefixed with its lane ([unit] ...), the whole lane log is kept in $LANES_OUT/LANE.log,
# and a summary with each lane's exit code and minutes (and its goals' minutes) ends the run (a failed
# lane's FAILED/ERROR lines under its row); the exit code is 1 when a lane failed.
#   scripts/test-lanes.sh 'unit=unit' 'roles1=test-roles1 ROLES1_SCENARIOS=envs' 'host=infra-local image-test ...'
set -uo pipefail

LANES_OUT=${LANES_OUT:-out/test-lanes}
MAKE=${MAKE:-make}

if [ "${1:-}" = --lane ]; then  # one lane, in its own process group (see below)
  name=$2 goals=$3 start=$(date +%s)
  : > "$LANES_OUT/$name.goals"
  # Each goal on a make of its own (make's VAR=value words given to each), in order, up to the first that
  # fails, its exit code and seconds in $LANES_OUT/NAME.goals: the summary shows where a lane's time went
  # (CI's 90 minutes; one make for all goals said only the lane's total).
  run_goals() {
    local word vars=() targets=() t rc
    for word in $goals; do
      if [[ $word == *=* ]]; then vars+=("$word"); else targets+=("$word"); fi
    done
    for word in "${targets[@]}"; do
      t=$(date +%s)
      $MAKE --no-print-directory -j1 "${vars[@]}" "$word"
      rc=$?
      echo "$word $rc $(($(date +%s) - t))" >> "$LANES_OUT/$name.goals"
      [ "$rc" = 0 ] || return "$rc"
    done
  }
  run_goals 2>&1 | tee "$LANES_OUT/$name.log" | sed -u "s/^/[$name] /"
  rc=${PIPESTATUS[0]}
  echo "$rc $(($(date +%s) - start))" > "$LANES_OUT/$name.status"
  exit "$rc"
fi

[ $# -gt 0 ] || { echo "usage: $0 'NAME=goal goal ...' ..." >&2; exit 2; }
for spec in "$@"; do
  name=${spec%%=*}
  [[ $spec == *=* && $name =~ ^[a-z0-9-]+$ && -n ${spec#*=} ]] || { echo "test-lanes: bad lane '$spec'" >&2; exit 2; }
done
mkdir -p "$LANES_OUT"
rm -f "$LANES_OUT"/*.status

goal_times() {  # a lane's goals as `goal 12.3` (minutes), a failed one `goal exit 2 after 1.0`
  [ -s "$LANES_OUT/$1.goals" ] || return 0
  awk '{ m = sprintf("%.1f", $3 / 60); printf "%s%s %s", (NR > 1 ? ", " : "         goals: "), $1,
         ($2 == 0 ? m : "exit " $2 " after " m) } END { print "" }' "$LANES_OUT/$1.goals"
}

summary() {
  echo "== lanes (goals in order within a lane, lanes side by side)"
  for spec in "$@"; do
    name=${spec%%=*}
    if read -r rc secs 2>/dev/null < "$LANES_OUT/$name.status"; then
      printf '%-8s exit %-3s %5s min  %s\n' "$name" "$rc" "$(awk "BEGIN { printf \"%.1f\", $secs / 60 }")" "${spec#*=}"
      goal_times "$name"
      # a failed lane's failures here, at the end: CI shows only a log's last lines, and the lane's own
      # pytest summary may lie thousands of lines above them, among the other lanes' output
      [ "$rc" = 0 ] || grep -a -E "${LANES_FAILURES:-^(FAILED|ERROR) |^make.*Error [0-9]|CRITICAL|fatal: \[}" \
        "$LANES_OUT/$name.log" 2>/dev/null | tail -n "${LANES_FAILURE_LINES:-30}" | cut -c1-300 | sed "s/^/  [$name] /"
    else
      printf '%-8s stopped %5s min  %s; its last lines:\n' "$name" \
        "$(awk "BEGIN { printf \"%.1f\", $(($(date +%s) - started)) / 60 }")" "${spec#*=}"
      tail -n "${LANES_TAIL:-5}" "$LANES_OUT/$name.log" 2>/dev/null | sed "s/^/  [$name] /"
      goal_times "$name"  # those it finished
    fi
  done
}

# Ctrl-C or CI's stop takes every lane down (each lane's make, molecule and pytest are in its process group)
# and still prints the summary: a CI log may keep only its last lines, and they should say where each lane was
pids=()
started=$(date +%s)
stop() {
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
  summary "$@"
  exit 130
}
trap 'stop "$@"' INT TERM
for spec in "$@"; do
  setsid bash "$0" --lane "${spec%%=*}" "${spec#*=}" &
  pids+=($!)
done

failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done

summary "$@"
exit "$failed"
