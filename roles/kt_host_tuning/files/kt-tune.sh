#!/bin/sh
# kt-tune KIND TARGET WANTED: apply one runtime setting (or, for a limit, check that logins can get it), print one
# JSON line
#   {"setting", "wanted", "before", "status": applied|set|not_set|absent, "reason"}
# "set" = changed now; "applied" = already as wanted; never exits non-zero for a setting that cannot be set.
# KT_TUNE_DRY=1 (ansible --check): reads only; "would_set" where it could write, "not_set" where it could not.
# KT_TUNE_SYSCTL_ROOT, KT_TUNE_CPU_ROOT, KT_TUNE_MEMINFO: where sysctls, cpufreq and meminfo are (default
# /proc/sys, /sys/devices/system/cpu and /proc/meminfo; the tests use directories and a file).
kind=$1 target=$2 wanted=$3 before="" undo=""
sysctl_root=${KT_TUNE_SYSCTL_ROOT:-/proc/sys}
cpu_root=${KT_TUNE_CPU_ROOT:-/sys/devices/system/cpu}
meminfo=${KT_TUNE_MEMINFO:-/proc/meminfo}
# JSON string content: no quotes or backslashes, every control character (the kernel's tabs) a space
clean() { printf '%s' "$1" | tr -d '"\\' | tr '[:cntrl:]' ' '; }
# multi-value sysctls (ip_local_port_range) read back tab-separated: compare with whitespace collapsed
norm() { printf '%s' "$1" | tr -s '[:space:]' ' ' | sed 's/^ //; s/ $//'; }
same() { [ "$(norm "$1")" = "$(norm "$2")" ]; }
emit() {
  printf '{"setting": "%s", "wanted": "%s", "before": "%s", "status": "%s", "reason": "%s"}\n' \
    "$(clean "$target")" "$(clean "$wanted")" "$(clean "$before")" "$1" "$(clean "$2")"
  exit 0
}
# the shell's error names this script's temporary path: keep only the reason, so reports are stable. printf is
# coreutils' (env): dash's builtin said "I/O error" for every failed write, hiding the kernel's "Invalid argument"
write() {
  if [ "${KT_TUNE_DRY:-}" = 1 ]; then
    [ -w "$1" ] && emit would_set ""
    emit not_set "cannot write $1 (read-only or not permitted)"
  fi
  err=$( (env printf '%s\n' "$2" > "$1") 2>&1) || { rollback; emit not_set "cannot write $1: ${err##*: }$put_back"; }
}
# a setting of several files (one governor per CPU) that fails part-way puts back the files it had written
# ("path=value ..." in undo), so not_set means nothing changed, not "some CPUs changed"
rollback() {
  put_back=""
  [ -n "$undo" ] || return 0
  for pair in $undo; do (env printf '%s\n' "${pair#*=}" > "${pair%%=*}") 2>/dev/null; done
  put_back=" (the $(echo $undo | wc -w) written before it were put back)"
}
case $kind in
  sysctl)
    # sysctl.d's rule: a name whose first separator is a slash is a path as it is (net/ipv4/conf/eth0.100/
    # rp_filter); in the dotted form dots and slashes swap (net.ipv4.conf.eth0/100.rp_filter): tr . / made
    # both .../eth0/100/..., reported absent while sysctl.d set eth0.100's at boot
    head=${target%%[./]*}
    case ${target#"$head"} in
      /*) path=$sysctl_root/$target ;;
      *) path=$sysctl_root/$(printf '%s' "$target" | tr './' '/.') ;;
    esac
    case /${path#"$sysctl_root"/}/ in
      *//* | */./* | */../*) emit absent "$target is not a sysctl name (an empty, . or .. part)" ;;
    esac
    [ -e "$path" ] || emit absent "$path does not exist on this kernel"
    before=$(cat "$path")
    same "$before" "$wanted" && emit applied ""
    write "$path" "$wanted"
    same "$(cat "$path")" "$wanted" || emit not_set "the kernel kept $(cat "$path")"
    emit set "" ;;
  thp)
    [ -e "$target" ] || emit absent "$target does not exist (kernel without THP)"
    before=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$target")
    [ "$before" = "$wanted" ] && emit applied ""
    write "$target" "$wanted"
    emit set "" ;;
  governor)
    files=$(ls "$cpu_root"/cpu[0-9]*/cpufreq/scaling_governor 2>/dev/null)
    [ -n "$files" ] || emit absent "no cpufreq on this host (VM or container): the hypervisor owns frequency"
    before=$(cat $files | sort -u | tr '\n' ' ' | sed 's/ $//')
    [ "$before" = "$wanted" ] && emit applied ""
    for f in $files; do
      old=$(cat "$f")
      write "$f" "$wanted"
      undo="$undo $f=$old"
    done
    emit set "" ;;
  shm)
    [ -d /dev/shm ] || emit absent "/dev/shm is not mounted"
    before=$(df -B1 --output=size /dev/shm | tail -1 | tr -d ' ')
    size=$wanted
    case $wanted in
      # tmpfs takes N% of MemTotal, which counts the hugetlb pool tmpfs cannot use: as the role (vars/main.yml),
      # N% of MemTotal less the pool (Hugetlb, else HugePages_Total x Hugepagesize), in KiB, at least 1k
      *%) sizes=$(awk -v p="${wanted%\%}" '/^MemTotal:/ {t = $2} /^Hugetlb:/ {h = $2}
            /^HugePages_Total:/ {n = $2} /^Hugepagesize:/ {s = $2}
            END {if (t == "") exit 1; if (h == "") h = n * s; k = int((t - h) * p / 100)
                 printf "%.0f %.0f\n", (k < 1 ? 1 : k), h}' "$meminfo" 2>/dev/null)
          kib=${sizes% *} pool=${sizes#* }
          case $kib in ''|*[!0-9]*) emit not_set "no MemTotal in $meminfo to take $wanted of" ;; esac
          [ "$pool" -gt 0 ] && size=${kib}k
          want_bytes=$((kib * 1024)) ;;
      *) want_bytes=$(numfmt --from=iec "$(printf '%s' "$wanted" | tr kmg KMG)") ;;
    esac
    # tmpfs rounds to pages: within 1% counts as applied
    awk -v a="$before" -v b="$want_bytes" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= b / 100)}' \
      && emit applied ""
    if [ "${KT_TUNE_DRY:-}" = 1 ]; then  # remount needs CAP_SYS_ADMIN (bit 21 of the effective set)
      cap=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
      [ $(( 0x$cap >> 21 & 1 )) = 1 ] && emit would_set ""
      emit not_set "remount /dev/shm: no CAP_SYS_ADMIN"
    fi
    err=$(mount -o remount,size="$size" /dev/shm 2>&1) || emit not_set "remount /dev/shm: ${err##*: }"
    emit set "" ;;
  limit)
    # limits.d is applied at each login by pam_limits, which cannot raise a hard limit above the one it runs with
    # where raising it is not permitted (a container without CAP_SYS_RESOURCE): it logs, and the login keeps it.
    # Probed in a subshell with soft = hard = wanted, as limits.d sets them
    case $target in memlock) flag=-l ;; nofile) flag=-n ;; *) emit absent "$target is not a limit this role sets" ;; esac
    before=$(ulimit -H $flag)
    [ "$before" = "$wanted" ] && emit applied ""
    (ulimit $flag "$wanted") 2>/dev/null || emit not_set "logins keep the hard $target limit $before: raising it \
is not permitted here (a container: docker run --ulimit $target=...)"
    emit applied "" ;;
  *) echo "kt-tune: unknown kind $kind" >&2; exit 64 ;;
esac
