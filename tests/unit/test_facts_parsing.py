"""The parser on incomplete and odd captures: any file may be missing, unknown means null."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ktinfra.facts import SOURCES, from_capture, load, parse_files
from ktinfra.facts.cgroup import parse_cgroup
from ktinfra.facts.cpulist import format_cpulist, parse_cpulist
from ktinfra.facts.lscpu import lscpu_fields

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
CAPTURES = sorted(p.name for p in HOSTS.iterdir() if p.is_dir())
CONTRACT = {
    "cpu": {
        "vendor",
        "model",
        "family",
        "model_id",
        "sockets",
        "numa_nodes",
        "threads_per_core",
        "logical_cpus",
    }
    | {"physical_cores", "cores_per_numa_node", "usable_cpus", "numa_node_cpus", "quota_cpus", "isa"},
    "isa": {
        "amx_tile",
        "amx_int8",
        "amx_bf16",
        "avx512f",
        "avx512bw",
        "avx512_vnni",
        "avx512_bf16",
        "avx512_vbmi",
    }
    | {"avx2"},
    "memory": {"total_bytes", "meminfo_total_bytes", "cgroup_limit_bytes"},
    "gpu": {"index", "name", "memory_mib", "compute_capability", "driver_version"},
    "os": {"id", "version_id", "kernel", "glibc"},
    "disk": {"mount", "avail_bytes", "size_bytes", "fstype"},
    "tuning": {"numa_balancing", "thp", "cpufreq_governor"},
}


@pytest.mark.parametrize("host", CAPTURES)
def test_every_capture_has_the_contract_keys(host):
    facts = from_capture(HOSTS / host)
    assert facts["schema"] == 1 and facts["source"] == str(HOSTS / host)
    assert CONTRACT["cpu"] <= facts["cpu"].keys()
    assert CONTRACT["isa"] <= facts["cpu"]["isa"].keys()
    assert all(isinstance(v, bool) for v in facts["cpu"]["isa"].values())
    assert CONTRACT["memory"] <= facts["memory"].keys()
    assert all(CONTRACT["gpu"] <= gpu.keys() for gpu in facts["gpus"])
    assert CONTRACT["os"] <= facts["os"].keys()
    assert all(CONTRACT["disk"] <= disk.keys() for disk in facts["disks"])
    assert CONTRACT["tuning"] == facts["tuning"].keys()
    assert isinstance(facts["container"], bool) and isinstance(facts["init"], str)
    json.dumps(facts)


@pytest.mark.parametrize("missing", sorted(SOURCES))
def test_any_single_file_may_be_missing(tmp_path, missing):
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / "synthetic-autodl-6430-4090", capture)
    (capture / missing).unlink(missing_ok=True)
    facts = from_capture(capture)
    # the answers with more than one source survive the loss of any one file
    assert (
        facts["cpu"]["physical_cores"] == 8
        if missing != "cgroup.txt"
        else facts["cpu"]["physical_cores"] == 64
    )
    assert facts["cpu"]["isa"]["amx_int8"] is True
    assert facts["cpu"]["numa_nodes"] == 2


def test_only_meminfo_gives_nulls_not_errors(tmp_path):
    (tmp_path / "meminfo.txt").write_text("MemTotal:       1024 kB\n")
    facts = from_capture(tmp_path)
    assert facts["memory"]["total_bytes"] == 1024 * 1024
    cpu = facts["cpu"]
    assert cpu["model"] is None and cpu["physical_cores"] is None and cpu["logical_cpus"] is None
    assert set(cpu["isa"].values()) == {None}
    assert facts["gpus"] == [] and facts["disks"] == [] and facts["init"] is None
    assert facts["os"] == {
        "id": None,
        "version_id": None,
        "pretty_name": None,
        "kernel": None,
        "arch": None,
        "glibc": None,
        "glibc_source": None,
    }
    assert facts["tuning"] == {"numa_balancing": None, "thp": None, "cpufreq_governor": None}


def test_garbage_in_every_file_does_not_crash():
    facts = parse_files({name: "\x00garbage: [ {\n-1,-2\nnode x cpus: a-b\n" for name in SOURCES}, "garbage")
    assert facts["cpu"]["physical_cores"] is None
    assert facts["gpus"] == [] and facts["memory"]["total_bytes"] is None


def test_not_a_capture_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        from_capture(tmp_path / "absent")
    (tmp_path / "README.md").write_text("hello\n")
    with pytest.raises(ValueError, match="not a capture folder"):
        from_capture(tmp_path)


def test_cgroup_v1_and_v2_limit_formats():
    v1 = parse_cgroup(
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us: 250000\n/sys/fs/cgroup/cpu/cpu.cfs_period_us: 100000\n"
        "/sys/fs/cgroup/memory/memory.limit_in_bytes: 9223372036854771712\n"
        "/sys/fs/cgroup/memory/x/memory.limit_in_bytes: 4294967296\n"
        "/sys/fs/cgroup/cpuset/cpuset.cpus: 0-7\n/sys/fs/cgroup/cpuset/x/cpuset.cpus: 2-11\n"
    )
    assert (v1.quota_cpus, v1.memory_limit_bytes, v1.cpuset) == (2.5, 4294967296, set(range(2, 8)))
    unlimited = parse_cgroup(
        "/sys/fs/cgroup/cpu.max: max 100000\n/sys/fs/cgroup/memory.max: max\n"
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us: -1\n/sys/fs/cgroup/cpu/cpu.cfs_period_us: 100000\n"
    )
    assert (unlimited.quota_cpus, unlimited.memory_limit_bytes, unlimited.cpuset) == (None, None, None)
    assert (
        parse_cgroup(
            "/sys/fs/cgroup/a/cpu.max: 50000 100000\n/sys/fs/cgroup/cpu.max: 800000 100000\n"
        ).quota_cpus
        == 0.5
    )


def test_cgroup_memory_left_is_the_tightest_level():
    limits = parse_cgroup(
        "/sys/fs/cgroup/a/memory.max: 8589934592\n/sys/fs/cgroup/a/memory.current: 6442450944\n"
        "/sys/fs/cgroup/a/b/memory.max: 4294967296\n/sys/fs/cgroup/a/b/memory.current: 1073741824\n"
        "/sys/fs/cgroup/memory.current: 99999999999\n"  # no limit at the root: its usage does not count
    )
    assert (limits.memory_limit_bytes, limits.memory_free_bytes) == (4294967296, 2147483648)
    assert parse_cgroup("/sys/fs/cgroup/memory.max: 4096\n").memory_free_bytes == 4096
    assert parse_cgroup("/sys/fs/cgroup/memory.current: 4096\n").memory_free_bytes is None


def test_fractional_quota_still_leaves_one_core(tmp_path):
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / "synthetic-autodl-8352v-4090", capture)
    (capture / "cgroup.txt").write_text("/sys/fs/cgroup/cpu.max: 50000 100000\n")
    cpu = from_capture(capture)["cpu"]
    assert (cpu["quota_cpus"], cpu["logical_cpus"], cpu["physical_cores"], cpu["cores_per_numa_node"]) == (
        0.5,
        1,
        1,
        1,
    )


def test_cpulists():
    assert parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpulist("0 1 2") == {0, 1, 2}
    assert parse_cpulist("") is None and parse_cpulist("a-b") is None
    assert format_cpulist({11, 10, 0, 1, 2, 3, 8}) == "0-3,8,10-11"
    assert format_cpulist([5]) == "5"


def test_nested_lscpu_json_of_util_linux_hierarchic_output():
    nested = json.dumps(
        {
            "lscpu": [
                {
                    "field": "Architecture:",
                    "data": "x86_64",
                    "children": [{"field": "CPU(s):", "data": "8"}],
                },
                {
                    "field": "Vendor ID:",
                    "data": "GenuineIntel",
                    "children": [{"field": "Thread(s) per core:", "data": "2"}],
                },
            ]
        }
    )
    fields = lscpu_fields(nested, None)
    assert (
        fields["CPU(s)"] == "8"
        and fields["Thread(s) per core"] == "2"
        and fields["Vendor ID"] == "GenuineIntel"
    )
    assert lscpu_fields("{not json", "CPU(s):   4\n") == {"CPU(s)": "4"}


def test_gpus_from_xml_when_the_csv_is_missing(tmp_path):
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / "2xh200-xeon-amx-32c", capture)
    (capture / "nvidia-smi-query.csv").unlink()
    gpus = from_capture(capture)["gpus"]
    assert [(g["index"], g["name"], g["memory_mib"], g["driver_version"]) for g in gpus] == [
        (0, "NVIDIA H200", 143771, "580.159.04"),
        (1, "NVIDIA H200", 143771, "580.159.04"),
    ]
    assert gpus[0]["pci_bus_id"] == "00000000:00:06.0" and gpus[0]["links"] == {"GPU1": "NV18"}


def test_glibc_from_ldd_beats_the_release_table(tmp_path):
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / "h100-xeon-amx-16c", capture)
    (capture / "ldd.txt").write_text("ldd (Ubuntu GLIBC 2.39-0ubuntu8.6) 2.39\nCopyright (C) 2024\n")
    assert from_capture(capture)["os"]["glibc_source"] == "ldd"
    (capture / "os-release.txt").write_text('ID=rocky\nVERSION_ID="9.4"\n')
    (capture / "ldd.txt").unlink()
    assert (from_capture(capture)["os"]["glibc"], from_capture(capture)["os"]["glibc_source"]) == (
        "2.34",
        "os-release",
    )
    (capture / "os-release.txt").write_text("ID=gentoo\nVERSION_ID=2.17\n")
    assert from_capture(capture)["os"]["glibc"] is None


@pytest.mark.parametrize(("root", "container"), [("/dev/vda ext4", False), ("overlay overlay", True)])
def test_dockerenv_on_a_vm_with_its_own_root_disk_is_not_a_container(tmp_path, root, container):
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / "epyc-2c-nogpu", capture)
    (capture / "container.txt").write_text("/.dockerenv: present\nsystemd-detect-virt --container: docker\n")
    source, fstype = root.split()
    (capture / "df.txt").write_text(
        f"Filesystem Type 1B-blocks Used Avail Mounted on\n{source} {fstype} 1000 400 600 /\n"
    )
    facts = from_capture(capture)
    assert facts["container"] is container
    assert all(reason.startswith("ignored:") for reason in facts["container_evidence"]) is not container


def test_kubernetes_and_podman_markers(tmp_path):
    files = {"proc-1-cgroup.txt": "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-1.scope\n"}
    assert parse_files(files, "x")["container_evidence"] == ["proc-1-cgroup.txt names a kubepods cgroup"]
    files = {"container.txt": "/run/.containerenv: present\npid1 environ container: podman\n"}
    assert parse_files(files, "x")["container"] is True


def test_load_reads_a_folder_or_a_facts_json(tmp_path):
    facts = load(HOSTS / "h100-xeon-amx-16c")
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    assert load(tmp_path / "facts.json") == facts
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not a facts JSON"):
        load(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"schema": 2}')
    with pytest.raises(ValueError, match="not facts schema 1"):
        load(tmp_path / "other.json")
    with pytest.raises(FileNotFoundError, match="not found"):
        load(tmp_path / "absent.json")


DF_WITH_OTHER_CONTAINERS = """\
Filesystem     Type           1B-blocks        Used       Avail Mounted on
overlay        overlay     500000000000 10000000000 490000000000 /
/dev/nvme0n1p1 ext4       1000000000000 20000000000 980000000000 /models
/dev/nvme1n1p1 xfs        2000000000000 30000000000 1970000000000 /devdata
/dev/nvme1n1p2 xfs        2000000000000 30000000000 1970000000000 /snapshots
overlay        overlay     500000000000 10000000000 490000000000 /var/lib/docker/overlay2/0a1b/merged
overlay        overlay     500000000000 10000000000 490000000000 /srv/ci/rootfs
fuse-overlayfs fuse.fuse-overlayfs 500000000000 1 2 /home/u/.local/share/containers/storage/overlay/9f/merged
shm            tmpfs           67108864           0    67108864 /var/lib/docker/containers/0a1b/mounts/shm
/dev/nvme0n1p1 ext4       1000000000000 20000000000 980000000000 /var/lib/kubelet/pods/77/volumes/x
/dev/nvme0n1p1 ext4       1000000000000 20000000000 980000000000 /run/containerd/io.containerd.runtime/k8s
/dev/loop3     ext4            10000000     5000000     5000000 /snap/core22/1380
tmpfs          tmpfs        68719476736           0 68719476736 /dev/shm
"""


def test_other_containers_mounts_are_not_disks():
    """On a docker host (or in a container sharing its mounts) df lists every container's overlay root and
    engine mounts: none is a disk to put models on; this container's own overlay / stays."""
    facts = parse_files({"df.txt": DF_WITH_OTHER_CONTAINERS}, "x")
    assert [(d["mount"], d["fstype"]) for d in facts["disks"]] == [
        ("/", "overlay"),
        ("/models", "ext4"),
        ("/devdata", "xfs"),
        ("/snapshots", "xfs"),
    ]
