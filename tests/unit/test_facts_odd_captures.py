"""Captures as users really make them (session 11's audit of `ktinfra facts --from`): a container's file
bind-mounts in df, pods and quota'd host sessions, CPU lists no host has, `lscpu -p -a`, headerless or BOM'd
nvidia-smi CSV, single-quoted os-release, files that are all empty."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ktinfra.facts import from_capture, parse_files
from ktinfra.facts.cpulist import parse_cpulist
from ktinfra.plan.host import validate
from ktinfra.planner import plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
AUTODL = "synthetic-autodl-6430-4090"

# docker bind-mounts these files from the host disk behind /var/lib/docker; the NVIDIA container toolkit
# mounts its binaries and libraries file by file.
FILE_MOUNTS = """\
/dev/nvme0n1p2 ext4 3840755982336 300000000000 3540755982336 /etc/hosts
/dev/nvme0n1p2 ext4 3840755982336 300000000000 3540755982336 /etc/hostname
/dev/nvme0n1p2 ext4 3840755982336 300000000000 3540755982336 /etc/resolv.conf
/dev/nvme0n1p2 ext4 3840755982336 300000000000 3540755982336 /usr/bin/nvidia-smi
/dev/nvme0n1p2 ext4 3840755982336 300000000000 3540755982336 /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06
/dev/nvme0n1p2 ext4 3840755982336 300000000000 3540755982336 /lib/firmware/nvidia/580.65.06/gsp_ga10x.bin
"""


def _copy(tmp_path: Path, host: str) -> Path:
    target = tmp_path / host
    shutil.copytree(HOSTS / host, target)
    return target


def test_file_bind_mounts_are_not_data_disks(tmp_path):
    capture = _copy(tmp_path, AUTODL)
    with (capture / "df.txt").open("a") as df:
        df.write(FILE_MOUNTS)
    facts = from_capture(capture)
    assert [d["mount"] for d in facts["disks"]] == ["/", "/root/autodl-tmp"]
    # the 3.5 TB behind /etc/hosts must not hide that the data disk is too small
    result = plan(facts, "Qwen3-235B-A22B", "serve")
    assert any("disk" in p and "/root/autodl-tmp" in p for p in result["problems"]), result["problems"]


def _df(root: str) -> str:
    source, fstype = root.split()
    return f"Filesystem Type 1B-blocks Used Avail Mounted on\n{source} {fstype} 1000 400 600 /\n"


def test_a_pod_is_known_by_its_overlay_root_alone():
    """containerd without a CPU limit: no docker marker, a private cgroup namespace ("0::/")."""
    files = {
        "df.txt": _df("overlay overlay"),
        "proc-1-cgroup.txt": "0::/\n",
        "container.txt": "/.dockerenv: absent\nsystemd-detect-virt --container: unknown\n",
    }
    facts = parse_files(files, "x")
    assert facts["container"] is True
    assert facts["container_evidence"] == ["/ is an overlay filesystem (a container image's layers)"]


QUOTA_V2 = {"cgroup.txt": "/sys/fs/cgroup/user.slice/session-3.scope/cpu.max: 3200000 100000\n"}
LSCPU_208 = {"lscpu.txt": "CPU(s): 208\nOn-line CPU(s) list: 0-207\nThread(s) per core: 2\nSocket(s): 2\n"}


def test_a_host_session_under_a_quota_is_not_a_container():
    """`systemd-run -p CPUQuota=3200%` on bare metal: systemd says no container and / is a block device."""
    files = {
        **QUOTA_V2,
        **LSCPU_208,
        "df.txt": _df("/dev/nvme0n1p2 ext4"),
        "container.txt": "/.dockerenv: absent\nsystemd-detect-virt --container: none\n",
    }
    facts = parse_files(files, "x")
    assert facts["cpu"]["quota_cpus"] == 32 and facts["container"] is False
    assert facts["container_evidence"] == [
        "ignored: CPU quota of 32 CPUs on a host with 208, but systemd-detect-virt --container says none, "
        "/ is /dev/nvme0n1p2"
    ]


@pytest.mark.parametrize(
    "root, virt",
    [("overlay overlay", "none"), ("/dev/nvme0n1p2 ext4", ""), ("/dev/nvme0n1p2 ext4", "unknown")],
)
def test_a_quota_still_counts_where_systemd_does_not_rule_a_container_out(root, virt):
    files = {**QUOTA_V2, **LSCPU_208, "df.txt": _df(root)}
    if virt:
        files["container.txt"] = f"systemd-detect-virt --container: {virt}\n"
    facts = parse_files(files, "x")
    assert facts["container"] is True
    assert "CPU quota of 32 CPUs on a host with 208" in facts["container_evidence"]


@pytest.mark.parametrize("text", ["0-4294967295", "4294967295", "8192", "7-3", "-1"])
def test_cpu_lists_no_host_has_are_not_cpu_lists(text):
    assert parse_cpulist(text) is None


def test_the_largest_cpu_list_a_kernel_allows():
    assert len(parse_cpulist("0-8191")) == 8192


def test_a_huge_cpu_count_is_unknown_not_allocated():
    facts = parse_files({"lscpu.txt": "CPU(s): 4294967296\n"}, "x")
    assert (facts["cpu"]["logical_cpus"], facts["cpu"]["physical_cores"]) == (None, None)
    capture = parse_files({**LSCPU_208, "proc-self-status.txt": "Cpus_allowed_list:\t0-4294967295\n"}, "x")
    assert capture["cpu"]["logical_cpus"] == 208  # the impossible list is ignored


def test_nproc_counts_the_allowed_cpus_when_nothing_else_lists_them():
    files = {"nproc.txt": "8\n", "proc-self-status.txt": "Cpus_allowed_list:\t8-15\n"}
    cpu = parse_files(files, "x")["cpu"]
    assert (cpu["logical_cpus"], cpu["physical_cores"], cpu["usable_cpus"]) == (8, 8, "8-15")


def test_offline_cpus_of_lscpu_p_a_are_left_out():
    rows = "".join(f"{c},{c % 52},{c // 52},{c // 52}\n" for c in range(104))
    rows += "".join(f"{c},,,\n" for c in range(104, 208))
    cpu = parse_files({"lscpu-p.txt": "# CPU,Core,Socket,Node\n" + rows}, "x")["cpu"]
    assert (cpu["logical_cpus"], cpu["physical_cores"]) == (104, 104)
    assert cpu["numa_node_cpus"] == {"0": "0-51", "1": "52-103"}


@pytest.mark.parametrize(
    "lscpu_json",
    [
        '{"lscpu": null}',
        '{"lscpu": 5}',
        '{"lscpu": [{"field": "Model name:", "data": "X", "children": 5}]}',
        '{"lscpu": ' + '[{"children": ' * 5000 + "[]" + "}]" * 5000 + "}",
    ],
)
def test_malformed_lscpu_json_gives_way_to_the_text(lscpu_json):
    facts = parse_files({"lscpu.json": lscpu_json, "lscpu.txt": "CPU(s): 6\nModel name: Y\n"}, "x")
    assert facts["cpu"]["logical_cpus"] in (6, None)
    assert facts["cpu"]["model"] in ("X", "Y")


def _csv(capture: Path) -> str:
    return (capture / "nvidia-smi-query.csv").read_text()


@pytest.mark.parametrize("damage", ["bom", "noheader"])
def test_gpus_are_read_from_a_bom_or_headerless_csv(tmp_path, damage):
    capture = _copy(tmp_path, "2xh200-xeon-amx-32c")
    for name in ("nvidia-smi-q.xml",):
        (capture / name).unlink(missing_ok=True)
    text = _csv(capture)
    text = "\ufeff" + text if damage == "bom" else "".join(text.splitlines(keepends=True)[1:])
    (capture / "nvidia-smi-query.csv").write_text(text)
    gpus = from_capture(capture)["gpus"]
    assert [(g["index"], g["name"], g["memory_mib"]) for g in gpus] == [
        (0, "NVIDIA H200", 143771),
        (1, "NVIDIA H200", 143771),
    ]


def test_single_quoted_os_release_values():
    files = {"os-release.txt": "ID='rocky'\nVERSION_ID='9.3'\nPRETTY_NAME=\"Rocky Linux 9.3\"\n"}
    os_facts = parse_files(files, "x")["os"]
    assert (os_facts["id"], os_facts["version_id"], os_facts["glibc"]) == ("rocky", "9.3", "2.34")
    assert os_facts["pretty_name"] == "Rocky Linux 9.3"


def test_a_folder_of_empty_files_is_not_a_capture(tmp_path):
    capture = _copy(tmp_path, "h100-xeon-amx-16c")
    for path in capture.iterdir():
        path.write_text("")
    with pytest.raises(ValueError, match="capture files are all empty"):
        from_capture(capture)


def test_a_file_given_as_the_capture_folder(tmp_path):
    capture = _copy(tmp_path, "h100-xeon-amx-16c")
    args = ["facts", "--from", str(capture / "lscpu.txt"), "--json"]
    proc = subprocess.run([sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"is a file; --from takes the capture folder ({capture})" in proc.stderr
    assert proc.stdout == ""


# SYNTHESIZED `nvidia-smi topo -m` outputs (no machine was captured), written into a copy of the synthetic
# dual-socket L40S capture: its GPU0 sits on NUMA node 0, GPU1 on node 1, each with a ConnectX NIC beside it.
# Older drivers head the NIC columns with the device name (mlx5_0); newer ones write NIC0 and add a
# "GPU NUMA ID" column (and a NIC legend below the table).
TOPO_NIC_COLUMNS = {
    "mlx5_names": (
        "\t\x1b[4mGPU0\tGPU1\tmlx5_0\tmlx5_1\tCPU Affinity\tNUMA Affinity\x1b[0m\n"
        "GPU0\t X \tSYS\tPIX\tSYS\t0-51,104-155\t0\n"
        "GPU1\tSYS\t X \tSYS\tPIX\t52-103,156-207\t1\n"
        "mlx5_0\tPIX\tSYS\t X \tSYS\t\t\n"
        "mlx5_1\tSYS\tPIX\tSYS\t X \t\t\n"
        "\nLegend:\n\n  X    = Self\n"
    ),
    "nic_numbers": (
        "\t\x1b[4mGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "GPU0\t X \tSYS\tPIX\tSYS\t0-51,104-155\t0\t\tN/A\n"
        "GPU1\tSYS\t X \tSYS\tPIX\t52-103,156-207\t1\t\tN/A\n"
        "NIC0\tPIX\tSYS\t X \tSYS\t\t\t\t\n"
        "NIC1\tSYS\tPIX\tSYS\t X \t\t\t\t\n"
        "\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
    ),
}


@pytest.mark.parametrize("layout", sorted(TOPO_NIC_COLUMNS))
def test_topology_columns_are_found_by_their_header(tmp_path, layout):
    # mlx5_0 headers were not taken for peers: their PIX/SYS cells became the CPU affinity, NUMA was lost
    capture = _copy(tmp_path, "synthetic-2s-8470q-amx")
    (capture / "nvidia-smi-topo.txt").write_text(TOPO_NIC_COLUMNS[layout])
    gpus = from_capture(capture)["gpus"]
    assert [(g["index"], g["cpu_affinity"], g["numa_affinity"], g["links"]) for g in gpus] == [
        (0, "0-51,104-155", 0, {"GPU1": "SYS"}),
        (1, "52-103,156-207", 1, {"GPU0": "SYS"}),
    ]


def test_a_csv_row_repeated_gives_one_gpu(tmp_path):
    # a capture appended to twice: each row comes again (synthesized from the real capture's CSV)
    capture = _copy(tmp_path, "2xh200-xeon-amx-32c")
    (capture / "nvidia-smi-q.xml").unlink()
    lines = _csv(capture).splitlines(keepends=True)
    (capture / "nvidia-smi-query.csv").write_text("".join(lines + lines[1:]))
    facts = from_capture(capture)
    assert [(g["index"], g["uuid"]) for g in facts["gpus"]] == [
        (0, "GPU-eba1675f-80ed-12b2-82e6-e05e0cb93f6f"),
        (1, "GPU-59fc4ea4-fb9d-8328-bbc3-2a0c069a1545"),
    ]
    assert len(plan(facts, "Qwen3-30B-A3B", "serve")["host"]["gpus"]) == 2  # plan took these facts


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1\n", 1), ("0", 0), ("²\n", None), ("١", None), ("1" * 5000, None), ("-1", None), ("", None)],
)
def test_numa_balancing_is_ascii_digits_or_unknown(text, expected):
    # "²" and "١" pass str.isdigit() but not int() / are no kernel value; 5000 digits are past int()'s limit
    assert parse_files({"numa_balancing.txt": text}, "x")["tuning"]["numa_balancing"] == expected


@pytest.mark.parametrize("cell", ["-1 9.0", "9.0.1", "9.0a", "sm_90", "9.²"])
def test_a_damaged_compute_capability_is_unknown(tmp_path, cell):
    # a damaged compute_cap cell (synthesized into the real H100 capture's CSV) was carried through, and
    # plan refused the facts it gave: gpus[0].compute_capability must be a compute capability such as "9.0"
    capture = _copy(tmp_path, "h100-xeon-amx-16c")
    csv = _csv(capture)
    assert csv.count(", 9.0, ") == 1
    (capture / "nvidia-smi-query.csv").write_text(csv.replace(", 9.0, ", f", {cell}, "))
    facts = from_capture(capture)
    assert facts["gpus"][0]["compute_capability"] is None  # the XML has none to fill it with
    assert validate(facts) is facts
