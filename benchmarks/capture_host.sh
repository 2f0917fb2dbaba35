#!/usr/bin/env bash
# Host capture in the layout of tests/fixtures/hosts/<name>/, for `ktinfra facts --from` to read.
# Where ktinfra runs (python3 -m ktinfra), this is `ktinfra facts --capture DIR`, the complete capture. Else a
# raw snapshot for a host without ktinfra: the files below only, so no cgroup v1 or own-cgroup files (a CPU
# quota in a cgroup v1 container, the AutoDL case, is not seen), no container evidence, stderr mixed in.
# usage: benchmarks/capture_host.sh DIR
set -u
dir=${1:?usage: capture_host.sh DIR}
if python3 -c 'import ktinfra.facts.capture' 2>/dev/null; then
  exec python3 -m ktinfra facts --capture "$dir"
fi
echo "capture_host.sh: ktinfra not importable, raw snapshot only (see the comment at the top)" >&2
export LC_ALL=C  # facts reads lscpu's and numactl's English field names, as ktinfra's own capture asks for
mkdir -p "$dir"
run() { local out=$1; shift; "$@" >"$dir/$out" 2>&1 || true; }
run lscpu.txt lscpu
run lscpu.json lscpu -J
run lscpu-p.txt lscpu -p
run cpuinfo.txt cat /proc/cpuinfo
run meminfo.txt cat /proc/meminfo
run nproc.txt nproc
run numactl-hardware.txt numactl --hardware
# each NUMA node's memory (its meminfo lines name the node), as ktinfra's capture records it
run node-meminfo.txt sh -c 'cat /sys/devices/system/node/node[0-9]*/meminfo'
# each node's huge pages of every size (node meminfo counts the default size only, not 1 GiB pages)
run node-hugepages.txt sh -c 'grep -H . /sys/devices/system/node/node[0-9]*/hugepages/hugepages-*kB/nr_hugepages'
# drivers before R510 refuse the whole query for compute_cap: asked again without it, as ktinfra's capture does
fields=index,name,uuid,memory.total,memory.used,compute_cap,driver_version,pci.bus_id
if ! nvidia-smi --format=csv --query-gpu="$fields" >"$dir/nvidia-smi-query.csv" 2>&1 &&
  older=$(nvidia-smi --format=csv --query-gpu="${fields/compute_cap,/}" 2>&1); then
  printf '# ktinfra facts: this driver refused --query-gpu with compute_cap; asked again without it\n%s\n' \
    "$older" >"$dir/nvidia-smi-query.csv"
fi
run nvidia-smi-q.xml nvidia-smi -q -x
run nvidia-smi-topo.txt nvidia-smi topo -m
run df.txt df -B1 --output=source,fstype,size,used,avail,target
run lsblk.json lsblk -J
run os-release.txt cat /etc/os-release
run uname.txt uname -a
run uname-s.txt uname -s  # each field alone: a host name may hold a space
run uname-r.txt uname -r
run uname-m.txt uname -m
run thp.txt cat /sys/kernel/mm/transparent_hugepage/enabled
run numa_balancing.txt cat /proc/sys/kernel/numa_balancing
run pid1.txt cat /proc/1/comm
run proc-self-status.txt grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status
{
  for f in /sys/fs/cgroup/cpuset.cpus.effective /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max; do
    [ -r "$f" ] && echo "$f: $(cat "$f")"
  done
} >"$dir/cgroup.txt"
{
  ls /sys/devices/system/cpu/cpu0/cpufreq/
  cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
} >"$dir/cpufreq.txt" 2>&1
echo "captured $(ls "$dir" | wc -l) files into $dir"
