#!/usr/bin/env bash
# Runs ON the device host (GPU + AMX, no network), from the root of the checkout the device tool sent, with
# .devcarry carried (see prepare.sh). Results: $OUT/log.txt and $OUT/results.tgz (re-packed after each phase).
# usage: bash .devcarry/repo/scripts/device/on_device.sh [info capture facts suite doctor isa validate stream moe-quick moe moe-repeat moe-headroom moe-tp moe-concurrency moe-cpu-share rawint4 gguf-kquant]
set -u
carry=$(cd "$(dirname "$0")/../../.." && pwd)
repo=$carry/repo
out=${OUT:-/tmp/kt-device-out}
res=/tmp/kt-device-results
mkdir -p "$out" "$res"
export PYTHONPATH=$repo:$carry/site PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
phases=${*:-info capture suite doctor stream moe}
cd "$repo" || exit 1
exec > >(tee -a "$out/log.txt") 2>&1

pack() { tar -czf "$out/results.tgz" -C "$res" . ; }
kt() { python3 -c 'import sys; from kt_kernel.cli.main import main; sys.argv[0] = "kt"; main()' "$@"; }
physical_cores() { python3 -c 'import os; print(len({open(f"/sys/devices/system/cpu/cpu{c}/topology/core_id").read() + open(f"/sys/devices/system/cpu/cpu{c}/topology/physical_package_id").read() for c in os.sched_getaffinity(0)}))'; }
# node 0 where /sys shows no node folders (paste succeeds on empty input, so `|| echo 0` never fired)
numa_nodes() { local n; n=$(ls -d /sys/devices/system/node/node* 2>/dev/null | sed 's/.*node//' | paste -sd,); echo "${n:-0}"; }
suite() { local name=$1; shift; python3 -m pytest tests/infra --hosts=local:// -p no:cacheprovider -rA \
  -o junit_logging=system-out -o junit_family=xunit1 --junitxml="$res/$name.xml" "$@" >"$res/$name.txt" 2>&1
  echo "suite $name rc=$? :: $(tail -1 "$res/$name.txt")"; }

for phase in $phases; do
  echo "=== $phase $(date -u +%FT%TZ)"
  case $phase in
    info)
      uname -a; nproc; lscpu | grep -E 'Model name|^CPU\(s\)|Thread|NUMA node|L3'
      nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
      python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
      python3 -c 'import kt_kernel as k; print("kt_kernel", k.__version__, k.__cpu_variant__, k.__int8_kernel__)'
      python3 -m pytest --version; echo "physical cores $(physical_cores) numa nodes $(numa_nodes)" ;;
    capture)
      bash benchmarks/capture_host.sh "$res/capture"
      kt doctor >"$res/kt-doctor.txt" 2>&1; echo "kt doctor rc=$?"
      kt version >"$res/kt-version.txt" 2>&1
      if python3 -c 'import ktinfra.facts' 2>/dev/null; then
        python3 -m ktinfra facts --json >"$res/ktinfra-facts.json" 2>"$res/ktinfra-facts.err"; echo "facts rc=$?"
      else echo "ktinfra.facts not in this tree: facts compared later from capture/"; fi ;;
    facts)
      python3 -m ktinfra facts --json >"$res/facts-live.json"; echo "ktinfra facts rc=$?"
      python3 -m ktinfra facts --capture "$res/capture-ktinfra" >/dev/null; echo "ktinfra facts --capture rc=$?"
      kt doctor >"$res/kt-doctor.txt" 2>&1; echo "kt doctor rc=$?"
      python3 -m ktinfra plan --model Qwen3-30B-A3B --mode serve --json >"$res/plan-serve.json"
      echo "ktinfra plan rc=$? $(grep -E '"kt_(cpuinfer|threadpool_count)"' "$res/plan-serve.json" | tr -d ' \n')"
      python3 benchmarks/facts_check.py --facts "$res/facts-live.json" --kt-doctor "$res/kt-doctor.txt" \
        --capture "$res/capture-ktinfra" --capture tests/fixtures/hosts/h100-xeon-amx-16c >"$res/facts-check.md"
      echo "facts_check rc=$?"; cat "$res/facts-check.md" ;;
    moe-repeat)
      python3 benchmarks/moe_threads.py --configs 12x1,13x1,14x1,15x1,16x1,15x2 --numa-nodes "$(numa_nodes)" \
        --out "$out/moe_repeat.json" ;;
    moe-tp)
      # CPUInfer threads beside the schedulers of tensor-parallel ranks (cuda spinners, one per GPU in turn):
      # the single-GPU reserve (N-2 threads) against one more CPU kept per extra rank (N-3 at TP 2)
      n=$(nproc)
      python3 benchmarks/moe_threads.py --spinner-kind cuda --numa-nodes "$(numa_nodes)" \
        --configs "$((n-2))x1,$((n-3))x1,$((n-2))x1+1,$((n-2))x1+2,$((n-3))x1+2,$((n-2))x1+1,$((n-2))x1+2,$((n-3))x1+2" \
        --out "$out/moe_tp.json" ;;
    moe-headroom)
      # CPUInfer threads beside N busy processes (stand-ins for the serving process's own busy threads)
      python3 benchmarks/moe_threads.py --configs 15x1+1,14x1+1,14x1+2,13x1+2,12x1+2,12x1+4 \
        --numa-nodes "$(numa_nodes)" --out "$out/moe_headroom.json" ;;
    suite)
      suite serve --kt-role=serve
      suite sft --kt-role=sft
      suite any --kt-role=any
      # a lower kt-kernel variant exported in the shell doctor runs from: no serve instance loads it (they
      # read the env file only), so the variant check must ignore it and pass (4442954; it failed before)
      KT_KERNEL_CPU_VARIANT=avx512_base suite forced-variant --kt-role=serve -k loads_best_variant ;;
    doctor)
      python3 -m ktinfra doctor --json --hosts local:// --role serve >"$res/doctor-serve.json" 2>"$res/doctor.err"
      echo "ktinfra doctor --role serve rc=$?"
      python3 -m ktinfra doctor --hosts local:// --role serve >"$res/doctor-serve.txt" 2>&1; echo "table rc=$?"
      # everything but the profile pins (the image's torch 2.11 is off the kt-0.7 pin by design of this host)
      python3 -m ktinfra doctor --hosts local:// --role sft -k 'not env_matches_profile_pins' --json \
        >"$res/doctor-sft-nopins.json"; echo "ktinfra doctor --role sft -k 'not pins' rc=$?" ;;
    isa)
      # the non-AMX serve methods' flag check (test_cpu_runs_the_serve_method) on a real AMX CPU: all pass
      for m in BF16 FP8 RAWINT4 LLAMAFILE; do
        python3 -m ktinfra doctor --hosts local:// --role serve --method "$m" -k cpu_runs_the_serve_method \
          --json >"$res/doctor-isa-$m.json" 2>&1
        echo "doctor --method $m rc=$? :: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([(c["status"], c["message"][:120]) for c in d["checks"]])' "$res/doctor-isa-$m.json" 2>&1)"
      done ;;
    stream)
      python3 benchmarks/stream.py --gib 2 --reps 10 --threads 1,2,4,8,12,14,15,16 --out "$res/stream.json" ;;
    moe-concurrency)
      python3 benchmarks/moe_concurrency.py --threads "$(( $(physical_cores) - 2 )),8" --out "$out/moe_concurrency.json"
      cp "$out/moe_concurrency.json" "$res/" ;;
    moe-cpu-share)
      python3 benchmarks/moe_cpu_share.py --threads "$(( $(physical_cores) - 2 ))" ${KT_SKIP_BY:+--skip-by "$KT_SKIP_BY"} --out "$out/moe_cpu_share.json"
      cp "$out/moe_cpu_share.json" "$res/" ;;
    moe-quick)
      python3 benchmarks/moe_threads.py --threads 16 --pools 1 --numa-nodes "$(numa_nodes)" --out "$res/moe-t16.json"
      python3 -c 'import json,sys; [print(s) for s in json.load(open(sys.argv[1]))["shapes"]]' "$res/moe-t16.json" ;;
    validate)
      # the image build's validate step over this host's python (real nvidia-* namespace wheels, kt-kernel)
      python3 scripts/device/validate_spec.py "$res/validate-spec.json"
      mkdir -p "$res/empty-wheelhouse"
      python3 images/scripts/validate.py "$res/validate-spec.json" "$res/validate-packages.json" \
        "$res/empty-wheelhouse" >"$res/validate.txt" 2>&1; echo "validate.py rc=$?"; cat "$res/validate.txt" ;;
    moe)
      # written to $out after every config, so a run cut at its time limit still brings back what it measured
      python3 benchmarks/moe_threads.py --cores "$(physical_cores)" --numa-nodes "$(numa_nodes)" \
        --out "$out/moe_threads.json"
      cp "$out/moe_threads.json" "$res/" ;;
    gguf-kquant)
      # kt-kernel's LLAMAFILE backend on K-quant and IQ expert tensors vs gguf-py's dequantized reference
      # (KT_GGUF_TYPES: a comma-separated subset; KT_GGUF_SEED: the random weights' seed)
      python3 scripts/device/gguf_kquant_check.py --threads 14 ${KT_GGUF_TYPES:+--types "$KT_GGUF_TYPES"} \
        --seed "${KT_GGUF_SEED:-0}" --out "$out/gguf_kquant-seed${KT_GGUF_SEED:-0}.json" 2>"$res/gguf-kquant.err"
      echo "gguf-kquant rc=$?"; tail -5 "$res/gguf-kquant.err" ;;
    rawint4)
      # kt-kernel's RAWINT4 (Kimi-K2-Thinking's int4 experts): the default backend and the AVX2 fallback
      for backend in auto avx2; do
        env $([ "$backend" = auto ] || echo "KT_RAWINT4_BACKEND=$backend") python3 scripts/device/rawint4_check.py \
          --threads 14 --dir "/tmp/kt-rawint4-$backend" >"$res/rawint4-$backend.json" 2>"$res/rawint4-$backend.err"
        echo "rawint4 $backend rc=$? $(cat "$res/rawint4-$backend.json")"; tail -3 "$res/rawint4-$backend.err"
      done
      python3 -m ktinfra plan --model Kimi-K2-Thinking --mode serve --json >"$res/plan-kimi-k2-thinking.json"
      echo "ktinfra plan Kimi-K2-Thinking rc=$? $(grep -E '"kt_method"' "$res/plan-kimi-k2-thinking.json" | tr -d ' \n')" ;;
    *) echo "unknown phase $phase" ;;
  esac
  pack
done
echo "=== done $(date -u +%FT%TZ)"
