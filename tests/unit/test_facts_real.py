"""`from_capture` on the real host captures: exact numbers read from the files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktinfra.facts import from_capture

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
ALL_ISA = (
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_vbmi",
    "avx2",
)


@pytest.mark.parametrize(
    ("host", "cpus", "mem_kib", "gpu_name", "gpu_mib", "gpu_count", "avail", "shm"),
    [
        ("h100-xeon-amx-16c", 16, 131981020, "NVIDIA H100 80GB HBM3", 81559, 1, 68657106944, 137438953472),
        ("h200-xeon-amx-16c", 16, 131981020, "NVIDIA H200", 143771, 1, 68655341568, 137438953472),
        ("2xh200-xeon-amx-32c", 32, 263998500, "NVIDIA H200", 143771, 2, 137374765056, 274877906944),
    ],
)
def test_gpu_amx_vm_captures(host, cpus, mem_kib, gpu_name, gpu_mib, gpu_count, avail, shm):
    facts = from_capture(HOSTS / host)
    cpu = facts["cpu"]
    assert facts["schema"] == 1
    assert (cpu["vendor"], cpu["model"], cpu["family"], cpu["model_id"]) == (
        "GenuineIntel",
        "Intel(R) Xeon(R) Processor",
        6,
        207,
    )
    assert (cpu["sockets"], cpu["numa_nodes"], cpu["threads_per_core"]) == (1, 1, 1)
    assert cpu["logical_cpus"] == cpu["physical_cores"] == cpu["cores_per_numa_node"] == cpus
    assert cpu["usable_cpus"] == f"0-{cpus - 1}"
    assert cpu["numa_node_cpus"] == {"0": f"0-{cpus - 1}"}
    assert cpu["quota_cpus"] is None
    assert all(cpu["isa"][flag] for flag in ALL_ISA)
    # numactl shows only the memory the VM touched (4443 MB); RAM comes from /proc/meminfo
    assert facts["memory"]["total_bytes"] == mem_kib * 1024
    assert facts["memory"]["cgroup_limit_bytes"] is None
    assert [g["index"] for g in facts["gpus"]] == list(range(gpu_count))
    for gpu in facts["gpus"]:
        assert (gpu["name"], gpu["memory_mib"], gpu["compute_capability"]) == (gpu_name, gpu_mib, "9.0")
        assert gpu["driver_version"] == "580.159.04"
        assert gpu["numa_affinity"] == 0
    assert facts["nvidia"] == {"driver_version": "580.159.04", "cuda_version": "13.0"}
    assert facts["container"] is False
    assert facts["init"] == "process_api"
    assert facts["os"] == {
        "id": "ubuntu",
        "version_id": "24.04",
        "pretty_name": "Ubuntu 24.04.3 LTS",
        "kernel": "6.18.44-fc-v657-gpu",
        "arch": "x86_64",
        "glibc": "2.39",
        "glibc_source": "os-release",
    }
    assert [(d["mount"], d["avail_bytes"], d["fstype"]) for d in facts["disks"]] == [("/", avail, "ext4")]
    assert facts["shm_bytes"] == shm
    assert facts["tuning"] == {"numa_balancing": 0, "thp": "madvise", "cpufreq_governor": None}


def test_four_h200_capture():
    """nvidia-h200-x4 (2026-11-29): four NVLinked H200s, 64 cores on one node, and a cgroup memory limit above
    MemTotal (the 2x H200 VM had none)."""
    facts = from_capture(HOSTS / "4xh200-xeon-amx-64c")
    cpu = facts["cpu"]
    assert (cpu["physical_cores"], cpu["numa_nodes"], cpu["usable_cpus"]) == (64, 1, "0-63")
    assert all(cpu["isa"][flag] for flag in ALL_ISA)
    assert facts["memory"]["total_bytes"] == 528231220 * 1024  # MemTotal, under the 512 GiB cgroup limit
    assert facts["memory"]["cgroup_limit_bytes"] == 512 * 2**30
    assert [(g["index"], g["name"], g["memory_mib"]) for g in facts["gpus"]] == [
        (i, "NVIDIA H200", 143771) for i in range(4)
    ]
    assert facts["gpus"][0]["links"] == {"GPU1": "NV18", "GPU2": "NV18", "GPU3": "NV18"}
    assert [(d["mount"], d["avail_bytes"]) for d in facts["disks"]] == [("/", 252241244160)]
    assert (facts["container"], facts["init"]) == (False, "process_api")


def test_two_h200_are_nvlinked():
    gpus = from_capture(HOSTS / "2xh200-xeon-amx-32c")["gpus"]
    assert gpus[0]["links"] == {"GPU1": "NV18"}
    assert gpus[1]["links"] == {"GPU0": "NV18"}


def test_epyc_dev_machine_capture():
    facts = from_capture(HOSTS / "epyc-2c-nogpu")
    cpu = facts["cpu"]
    assert (cpu["vendor"], cpu["model"], cpu["family"]) == ("AuthenticAMD", "AMD EPYC", 25)
    assert (cpu["logical_cpus"], cpu["physical_cores"], cpu["numa_nodes"], cpu["usable_cpus"]) == (
        2,
        2,
        1,
        "0-1",
    )
    assert cpu["quota_cpus"] is None  # cfs_quota_us -1
    assert cpu["isa"]["avx2"] is True
    assert not any(cpu["isa"][flag] for flag in ALL_ISA if flag != "avx2")
    assert facts["memory"]["total_bytes"] == 24684096 * 1024
    assert facts["memory"]["cgroup_limit_bytes"] is None  # 9223372036854771712 means unlimited
    assert facts["gpus"] == []
    assert facts["container"] is False
    assert facts["os"]["id"] == "debian" and facts["os"]["glibc"] == "2.36"
    assert [(d["mount"], d["avail_bytes"]) for d in facts["disks"]] == [("/", 84508377088)]
    assert facts["shm_bytes"] == 25276514304


def test_files_written_by_capture_on_a_real_h200_vm(tmp_path):
    """cgroup.txt/container.txt as `ktinfra facts --capture` wrote them on a real H200 VM (2026-11-21)."""
    capture = tmp_path / "h200"
    shutil.copytree(HOSTS / "h200-xeon-amx-16c", capture)
    (capture / "cgroup.txt").write_text(
        "/sys/fs/cgroup/cpuset.cpus.effective: 0-15\n"
        "/sys/fs/cgroup/process_api/cpuset.cpus.effective: 0-15\n"
        "/sys/fs/cgroup/process_api/cpu.max: max 100000\n"
        "/sys/fs/cgroup/process_api/memory.max: 137438953472\n"
        "/sys/fs/cgroup/process_api/8a2b32ebf6ba852d5a5ff23d3775b988/memory.max: max\n"
    )
    (capture / "container.txt").write_text(
        "/.dockerenv: present\n/run/.containerenv: absent\nsystemd-detect-virt --container: unknown\n"
        "pid1 environ container: \n"
    )
    (capture / "proc-self-cgroup.txt").write_text("0::/process_api/8a2b32ebf6ba852d5a5ff23d3775b988\n")
    (capture / "proc-1-cgroup.txt").write_text("0::/process_api/core\n")
    facts = from_capture(capture)
    # the VM's 128 GiB cgroup limit sits above MemTotal: MemTotal decides
    assert facts["memory"]["cgroup_limit_bytes"] == 137438953472
    assert facts["memory"]["total_bytes"] == 131981020 * 1024
    assert facts["cpu"]["quota_cpus"] is None and facts["cpu"]["physical_cores"] == 16
    # the VM image keeps a /.dockerenv, but / is the VM's own disk
    assert facts["container"] is False
    assert facts["container_evidence"] == [
        "ignored: /.dockerenv present, but / is /dev/vda (ext4), not a container layer"
    ]
