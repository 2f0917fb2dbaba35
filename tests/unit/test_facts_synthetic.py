"""`from_capture` on the synthetic captures: HT siblings, NUMA, CPU quotas, cpusets, cgroup memory limits."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktinfra.facts import from_capture

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
GIB = 1 << 30


def test_dual_socket_hyperthreaded_amx_host():
    facts = from_capture(HOSTS / "synthetic-2s-8470q-amx")
    cpu = facts["cpu"]
    assert cpu["model"] == "Intel(R) Xeon(R) Platinum 8470Q"
    assert (cpu["family"], cpu["model_id"], cpu["sockets"], cpu["threads_per_core"]) == (6, 143, 2, 2)
    assert (cpu["logical_cpus"], cpu["physical_cores"], cpu["numa_nodes"], cpu["cores_per_numa_node"]) == (
        208,
        104,
        2,
        52,
    )
    assert cpu["numa_node_cpus"] == {"0": "0-51,104-155", "1": "52-103,156-207"}
    assert cpu["quota_cpus"] is None
    assert cpu["isa"]["amx_int8"] and cpu["isa"]["amx_bf16"] and cpu["isa"]["avx512_bf16"]
    assert facts["memory"]["total_bytes"] == 1056290072 * 1024
    assert [(g["numa_affinity"], g["links"]) for g in facts["gpus"]] == [
        (0, {"GPU1": "SYS"}),
        (1, {"GPU0": "SYS"}),
    ]
    assert facts["container"] is False and facts["container_evidence"] == []
    assert facts["init"] == "systemd"
    assert (facts["os"]["glibc"], facts["os"]["glibc_source"]) == ("2.35", "ldd")
    assert facts["tuning"] == {"numa_balancing": 1, "thp": "madvise", "cpufreq_governor": "powersave"}
    assert [(d["mount"], d["fstype"]) for d in facts["disks"]] == [("/", "ext4"), ("/data", "xfs")]


def test_autodl_container_with_cpu_quota_is_the_seed_002_host():
    facts = from_capture(HOSTS / "synthetic-autodl-6430-4090")
    cpu = facts["cpu"]
    assert cpu["model"] == "Intel(R) Xeon(R) Gold 6430"
    assert cpu["online_cpus"] == 128  # what lscpu shows: the host
    assert cpu["quota_cpus"] == 16.0
    # seed 002 section 4.1.1: 16 vCPU in the container -> 8 physical cores; --kt-threadpool-count 2
    assert (cpu["logical_cpus"], cpu["physical_cores"], cpu["numa_nodes"], cpu["cores_per_numa_node"]) == (
        16,
        8,
        2,
        4,
    )
    assert cpu["usable_cpus"] == "0-127"
    assert all(cpu["isa"][k] for k in ("amx_tile", "amx_int8", "amx_bf16", "avx512_bf16"))
    memory = facts["memory"]
    assert memory["total_bytes"] == memory["cgroup_limit_bytes"] == 120 * GIB
    assert memory["meminfo_total_bytes"] == 1056426348 * 1024
    # /proc/meminfo's MemAvailable is the host's ~1 TiB; no cgroup usage was captured: capped at the limit
    assert memory["available_bytes"] == 120 * GIB
    assert [(g["name"], g["memory_mib"], g["compute_capability"]) for g in facts["gpus"]] == [
        ("NVIDIA GeForce RTX 4090", 24564, "8.9")
    ]
    assert facts["container"] is True
    assert "CPU quota of 16 CPUs on a host with 128" in facts["container_evidence"]
    assert "proc-self-cgroup.txt names a docker cgroup" in facts["container_evidence"]
    assert facts["os"]["glibc"] == "2.35"
    assert [(d["mount"], d["avail_bytes"]) for d in facts["disks"]] == [
        ("/", 32212254720 - 16106127360),
        ("/root/autodl-tmp", 214748364800 - 1073741824),
    ]
    assert facts["shm_bytes"] == 64 * GIB


def test_non_amx_8352v_autodl_container_on_cgroup_v2():
    facts = from_capture(HOSTS / "synthetic-autodl-8352v-4090")
    cpu = facts["cpu"]
    assert (cpu["family"], cpu["model_id"]) == (6, 106)
    assert not any(cpu["isa"][k] for k in ("amx_tile", "amx_int8", "amx_bf16", "avx512_bf16"))
    assert all(cpu["isa"][k] for k in ("avx512f", "avx512bw", "avx512_vnni", "avx512_vbmi", "avx2"))
    assert cpu["quota_cpus"] == 12.0
    assert (cpu["logical_cpus"], cpu["physical_cores"], cpu["numa_nodes"], cpu["cores_per_numa_node"]) == (
        12,
        6,
        2,
        3,
    )
    assert facts["memory"]["total_bytes"] == 90 * GIB
    # no container cgroup path in a private cgroup namespace: the overlay /, the quota and /.dockerenv give it
    # away
    assert facts["container"] is True
    assert facts["container_evidence"] == [
        "/ is an overlay filesystem (a container image's layers)",
        "CPU quota of 12 CPUs on a host with 144",
        "/.dockerenv present",
    ]
    assert (facts["os"]["version_id"], facts["os"]["glibc"]) == ("20.04", "2.31")


def test_four_gpu_container_with_cpuset_counts_sibling_pairs_once():
    facts = from_capture(HOSTS / "synthetic-4x5090-8470q")
    cpu = facts["cpu"]
    assert cpu["usable_cpus"] == "0-23,52-75"
    assert (cpu["logical_cpus"], cpu["physical_cores"], cpu["numa_nodes"], cpu["cores_per_numa_node"]) == (
        48,
        24,
        1,
        24,
    )
    assert cpu["quota_cpus"] is None and facts["memory"]["cgroup_limit_bytes"] is None
    assert facts["memory"]["total_bytes"] == 527988876 * 1024
    assert [g["index"] for g in facts["gpus"]] == [0, 1, 2, 3]
    assert {(g["name"], g["memory_mib"], g["compute_capability"]) for g in facts["gpus"]} == {
        ("NVIDIA GeForce RTX 5090", 32607, "12.0")
    }
    assert facts["container"] is True
    assert facts["container_evidence"] == [
        "/ is an overlay filesystem (a container image's layers)",
        "/.dockerenv present",
    ]
    assert facts["init"] == "sleep"


def test_cpuset_of_first_threads_only_gives_one_core_per_cpu(tmp_path):
    capture = _copy(tmp_path, "synthetic-4x5090-8470q")
    (capture / "cgroup.txt").write_text("/sys/fs/cgroup/cpuset.cpus.effective: 0-15\n")
    (capture / "proc-self-status.txt").write_text("Cpus_allowed_list:\t0-15\n")
    cpu = from_capture(capture)["cpu"]
    assert (cpu["logical_cpus"], cpu["physical_cores"]) == (16, 16)


def test_quota_on_a_cpuset_without_sibling_pairs_counts_one_thread_per_core(tmp_path):
    capture = _copy(tmp_path, "synthetic-2s-8470q-amx")
    # the sibling of CPU n is n + 104 on this host: 0-3,8-11 holds eight cores, one thread each
    rows = [line.split(",") for line in (capture / "lscpu-p.txt").read_text().splitlines() if line[0] != "#"]
    core_of = {int(cpu): (socket, core) for cpu, core, socket, _ in rows}
    usable = [*range(4), *range(8, 12)]
    assert len({core_of[cpu] for cpu in usable}) == len(usable)
    (capture / "cgroup.txt").write_text(
        "/sys/fs/cgroup/cpu.max: 250000 100000\n/sys/fs/cgroup/cpuset.cpus.effective: 0-3,8-11\n"
    )
    cpu = from_capture(capture)["cpu"]
    assert cpu["threads_per_core"] == 2  # the host's
    assert (cpu["quota_cpus"], cpu["logical_cpus"], cpu["physical_cores"], cpu["cores_per_numa_node"]) == (
        2.5,
        2,
        2,
        2,
    )
    assert "1 thread per core in the usable CPUs" in cpu["physical_cores_basis"]


def test_quota_on_a_cpuset_with_some_sibling_pairs(tmp_path):
    capture = _copy(tmp_path, "synthetic-2s-8470q-amx")
    # 0-3 with their siblings 104-107 (4 cores, 8 CPUs) plus 8-11 alone: 12 CPUs on 8 cores, 1.5 per core
    (capture / "cgroup.txt").write_text(
        "/sys/fs/cgroup/cpu.max: 600000 100000\n/sys/fs/cgroup/cpuset.cpus.effective: 0-3,8-11,104-107\n"
    )
    cpu = from_capture(capture)["cpu"]
    assert (cpu["logical_cpus"], cpu["physical_cores"]) == (6, 4)


def test_memory_available_is_what_the_cgroup_leaves(tmp_path):
    capture = _copy(tmp_path, "synthetic-autodl-8352v-4090")
    with (capture / "cgroup.txt").open("a") as cgroup:
        cgroup.write(f"/sys/fs/cgroup/memory.current: {30 * GIB}\n")
    memory = from_capture(capture)["memory"]
    assert (memory["total_bytes"], memory["available_bytes"]) == (90 * GIB, 60 * GIB)
    # v1: memory.usage_in_bytes beside memory.limit_in_bytes; usage above the limit leaves nothing
    capture = _copy(tmp_path / "v1", "synthetic-autodl-6430-4090")
    with (capture / "cgroup.txt").open("a") as cgroup:
        cgroup.write(f"/sys/fs/cgroup/memory/memory.usage_in_bytes: {121 * GIB}\n")
    assert from_capture(capture)["memory"]["available_bytes"] == 0


def test_memory_available_of_a_host_below_its_cgroup_limit_is_meminfo(tmp_path):
    capture = _copy(tmp_path, "synthetic-autodl-8352v-4090")
    (capture / "cgroup.txt").write_text(
        f"/sys/fs/cgroup/memory.max: {4096 * GIB}\n/sys/fs/cgroup/memory.current: {GIB}\n"
    )
    meminfo = (capture / "meminfo.txt").read_text()
    mem_available = next(
        int(line.split()[1]) * 1024 for line in meminfo.splitlines() if "MemAvailable" in line
    )
    assert from_capture(capture)["memory"]["available_bytes"] == mem_available


@pytest.mark.parametrize("host", sorted(p.name for p in HOSTS.iterdir() if p.is_dir()))
def test_available_memory_never_exceeds_total(host):
    memory = from_capture(HOSTS / host)["memory"]
    assert memory["available_bytes"] <= memory["total_bytes"]


def test_tightest_cgroup_level_wins(tmp_path):
    capture = _copy(tmp_path, "synthetic-2s-8470q-amx")
    with (capture / "cgroup.txt").open("a") as cgroup:
        cgroup.write("/sys/fs/cgroup/user.slice/user-1000.slice/cpu.max: 2400000 100000\n")
        cgroup.write("/sys/fs/cgroup/user.slice/memory.max: 68719476736\n")
        cgroup.write(
            "/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope/cpuset.cpus.effective: 0-51,104-155\n"
        )
    facts = from_capture(capture)
    cpu = facts["cpu"]
    assert cpu["quota_cpus"] == 24.0
    assert (cpu["numa_nodes"], cpu["logical_cpus"], cpu["physical_cores"], cpu["cores_per_numa_node"]) == (
        1,
        24,
        12,
        12,
    )
    assert facts["memory"]["total_bytes"] == 64 * GIB


@pytest.mark.parametrize(
    "host", ["synthetic-autodl-6430-4090", "synthetic-2s-8470q-amx", "synthetic-4x5090-8470q"]
)
def test_topology_falls_back_to_cpuinfo_without_lscpu_p(tmp_path, host):
    expected = from_capture(HOSTS / host)["cpu"]
    capture = _copy(tmp_path, host)
    (capture / "lscpu-p.txt").unlink()
    cpu = from_capture(capture)["cpu"]
    keys = (
        "logical_cpus",
        "physical_cores",
        "numa_nodes",
        "cores_per_numa_node",
        "numa_node_cpus",
        "sockets",
    )
    assert {k: cpu[k] for k in keys} == {k: expected[k] for k in keys}


def test_container_detected_by_quota_alone(tmp_path):
    capture = _copy(tmp_path, "synthetic-autodl-6430-4090")
    for name in ("container.txt", "proc-self-cgroup.txt", "proc-1-cgroup.txt"):
        (capture / name).unlink()
    df = (capture / "df.txt").read_text().replace("overlay                 overlay", "/dev/sda1 ext4", 1)
    (capture / "df.txt").write_text(df)  # / on a block device: no image layers to tell
    facts = from_capture(capture)
    assert facts["container"] is True
    assert facts["container_evidence"] == ["CPU quota of 16 CPUs on a host with 128"]


def _copy(tmp_path: Path, host: str) -> Path:
    target = tmp_path / host
    shutil.copytree(HOSTS / host, target)
    return target


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("synthetic-2s-8470q-amx", (208, 104, 2, 52)),
        ("synthetic-autodl-6430-4090", (16, 8, 2, 4)),
        ("synthetic-4x5090-8470q", (48, 24, 1, 24)),
    ],
)
def test_counts_from_plain_lscpu_when_no_per_cpu_topology(tmp_path, host, expected):
    capture = _copy(tmp_path, host)
    for name in ("lscpu-p.txt", "cpuinfo.txt", "lscpu.json"):
        (capture / name).unlink()
    cpu = from_capture(capture)["cpu"]
    assert (
        cpu["logical_cpus"],
        cpu["physical_cores"],
        cpu["numa_nodes"],
        cpu["cores_per_numa_node"],
    ) == expected
    assert "no per-CPU core ids" in cpu["physical_cores_basis"]


@pytest.mark.parametrize("with_hugetlb_line", [True, False])
def test_a_static_hugepage_pool_is_not_counted_as_usable_memory(tmp_path, with_hugetlb_line):
    """Before: total_bytes was MemTotal, which counts the reserved hugetlb pool that ordinary allocations
    (expert weights, KV pool) cannot use: 100 x 1 GiB pages on the 128 GB H100 host left ~26 GB, and the plan
    for a model needing 61 GB of RAM said feasible. Synthetic: the H100 capture with that pool (and, for
    kernels before 4.16, without the Hugetlb line)."""
    host = tmp_path / "h100-hugepages"
    shutil.copytree(HOSTS / "h100-xeon-amx-16c", host)
    meminfo = (host / "meminfo.txt").read_text()
    meminfo = meminfo.replace("HugePages_Total:       0", "HugePages_Total:     100")
    meminfo = meminfo.replace("Hugepagesize:       2048 kB", "Hugepagesize:    1048576 kB")
    hugetlb = "Hugetlb:        104857600 kB" if with_hugetlb_line else ""
    meminfo = meminfo.replace("Hugetlb:               0 kB", hugetlb)
    (host / "meminfo.txt").write_text(meminfo)
    memory = from_capture(host)["memory"]
    assert memory["hugetlb_bytes"] == 100 * GIB
    assert memory["total_bytes"] == 131981020 * 1024 - 100 * GIB
    assert memory["meminfo_total_bytes"] == 131981020 * 1024
    plain = from_capture(HOSTS / "h100-xeon-amx-16c")["memory"]
    assert plain["hugetlb_bytes"] == 0 and plain["total_bytes"] == 131981020 * 1024
