"""Captures with a damaged file (junk, cut short, from elsewhere): other files decide, nothing is invented."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktinfra.facts import from_capture
from ktinfra.facts.lscpu import parse_cpuinfo, parse_lscpu_p

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def _copy(tmp_path: Path, host: str) -> Path:
    target = tmp_path / host
    shutil.copytree(HOSTS / host, target)
    return target


@pytest.mark.parametrize(
    "csv",
    [
        "garbage one\ngarbage two\n",
        "index, name\n",  # a header and no rows
        "index, name, uuid, memory.total [MiB]\n0, NVIDIA H1\n",  # cut inside the first row
        "\x00\x00\x00",
    ],
)
def test_junk_gpu_csv_falls_back_to_the_xml(tmp_path, csv):
    capture = _copy(tmp_path, "h100-xeon-amx-16c")
    (capture / "nvidia-smi-query.csv").write_text(csv)
    facts = from_capture(capture)
    assert [(g["index"], g["name"], g["memory_mib"], g["pci_bus_id"]) for g in facts["gpus"]] == [
        (0, "NVIDIA H100 80GB HBM3", 81559, "00000000:00:06.0")
    ]
    assert facts["gpus"][0]["numa_affinity"] == 0  # the topology file still applies
    assert facts["nvidia"] == {"driver_version": "580.159.04", "cuda_version": "13.0"}
    # this capture's nvidia-smi -q -x has no compute capability field: unknown, not guessed
    assert "compute_capability" not in (capture / "nvidia-smi-q.xml").read_text()
    assert facts["gpus"][0]["compute_capability"] is None


def test_compute_capability_is_read_from_the_xml_when_it_has_one(tmp_path):
    capture = _copy(tmp_path, "h100-xeon-amx-16c")
    (capture / "nvidia-smi-query.csv").unlink()
    xml = (capture / "nvidia-smi-q.xml").read_text()
    (capture / "nvidia-smi-q.xml").write_text(
        xml.replace("<minor_number>", "<compute_capability>9.0</compute_capability><minor_number>", 1)
    )
    assert from_capture(capture)["gpus"][0]["compute_capability"] == "9.0"


def test_a_gpu_missing_from_a_cut_csv_comes_from_the_xml(tmp_path):
    capture = _copy(tmp_path, "2xh200-xeon-amx-32c")
    lines = (capture / "nvidia-smi-query.csv").read_text().splitlines()
    # nvidia-smi prints an infoROM warning on stdout before the header; the file was cut in the second row
    (capture / "nvidia-smi-query.csv").write_text(
        "WARNING: infoROM is corrupted at gpu 0000:00:06.0\n"
        + lines[0]
        + "\n"
        + lines[1]
        + "\n"
        + lines[2][:20]
    )
    gpus = from_capture(capture)["gpus"]
    assert [(g["index"], g["name"], g["uuid"], g["links"]) for g in gpus] == [
        (0, "NVIDIA H200", "GPU-eba1675f-80ed-12b2-82e6-e05e0cb93f6f", {"GPU1": "NV18"}),
        (1, "NVIDIA H200", "GPU-59fc4ea4-fb9d-8328-bbc3-2a0c069a1545", {"GPU0": "NV18"}),
    ]
    # GPU 1 is known from the XML alone; its compute capability is that of the same chip in the CSV
    assert [g["compute_capability"] for g in gpus] == ["9.0", "9.0"]


def test_csv_and_xml_agree_on_the_real_captures():
    for host in ("h100-xeon-amx-16c", "h200-xeon-amx-16c", "2xh200-xeon-amx-32c"):
        gpus = from_capture(HOSTS / host)["gpus"]
        assert all(g["uuid"] and g["compute_capability"] == "9.0" for g in gpus)
        assert [g["index"] for g in gpus] == list(range(len(gpus)))


def _truncated(tmp_path: Path, size: int = 2000) -> Path:
    capture = _copy(tmp_path, "synthetic-2s-8470q-amx")
    whole = (HOSTS / "synthetic-2s-8470q-amx" / "lscpu-p.txt").read_bytes()
    (capture / "lscpu-p.txt").write_bytes(whole[:size])
    return capture


def test_cut_lscpu_p_rows_are_dropped():
    whole = (HOSTS / "synthetic-2s-8470q-amx" / "lscpu-p.txt").read_text()
    cut = whole[:2000]
    assert cut.endswith("\n176,72")  # what `head -c 2000` leaves: CPU 176 without socket and node
    rows = parse_lscpu_p(cut)
    assert [row.cpu for row in rows] == list(range(176))
    # a cut inside the last field leaves as many fields as the header: no newline gives it away
    assert [row.cpu for row in parse_lscpu_p("# CPU,Core,Socket,Node\n0,0,0,0\n1,1,0,1")] == [0]
    assert [row.cpu for row in parse_lscpu_p("# CPU,Core,Socket,Node\n0,0,0,0\n1,1,0,1\n")] == [0, 1]


def test_truncated_lscpu_p_gives_way_to_cpuinfo(tmp_path):
    cpu = from_capture(_truncated(tmp_path))["cpu"]
    assert (cpu["online_cpus"], cpu["logical_cpus"], cpu["physical_cores"], cpu["usable_cpus"]) == (
        208,
        208,
        104,
        "0-207",
    )
    assert (cpu["numa_nodes"], cpu["cores_per_numa_node"], cpu["sockets"]) == (2, 52, 2)
    assert "lscpu-p.txt lists 176 CPUs, lscpu's on-line list 208" in cpu["physical_cores_basis"]


def test_truncated_lscpu_p_without_cpuinfo_estimates_instead_of_counting_a_part(tmp_path):
    capture = _truncated(tmp_path)
    (capture / "cpuinfo.txt").unlink()
    cpu = from_capture(capture)["cpu"]
    assert (cpu["logical_cpus"], cpu["physical_cores"], cpu["cores_per_numa_node"]) == (208, 104, 52)
    assert cpu["numa_node_cpus"] == {"0": "0-51,104-155", "1": "52-103,156-207"}
    assert cpu["physical_cores_basis"].startswith("208 CPUs / 2 threads per core (core ids incomplete")


def test_truncated_lscpu_p_checked_against_numactl_without_lscpu(tmp_path):
    capture = _truncated(tmp_path)
    for name in ("cpuinfo.txt", "lscpu.txt", "lscpu.json"):
        (capture / name).unlink()
    cpu = from_capture(capture)["cpu"]
    assert (cpu["logical_cpus"], cpu["physical_cores"], cpu["numa_nodes"]) == (208, 104, 2)


def test_truncated_lscpu_p_checked_against_cpuinfo_alone(tmp_path):
    capture = _truncated(tmp_path)
    for name in ("numactl-hardware.txt", "lscpu.txt", "lscpu.json"):
        (capture / name).unlink()
    cpu = from_capture(capture)["cpu"]
    assert (cpu["logical_cpus"], cpu["physical_cores"]) == (208, 104)
    assert "from cpuinfo.txt" in cpu["physical_cores_basis"]


def test_a_cpuset_inside_the_intact_part_of_a_cut_file_is_counted_exactly(tmp_path):
    capture = _truncated(tmp_path)
    (capture / "cpuinfo.txt").unlink()
    (capture / "cgroup.txt").write_text("/sys/fs/cgroup/cpuset.cpus.effective: 0-51,104-155\n")
    cpu = from_capture(capture)["cpu"]
    assert (cpu["logical_cpus"], cpu["physical_cores"]) == (104, 52)
    assert cpu["physical_cores_basis"].startswith("CPUs 0-51,104-155 hold 52 physical cores")


def test_lscpu_p_of_another_host_is_not_believed(tmp_path):
    capture = _copy(tmp_path, "synthetic-autodl-8352v-4090")  # 144 CPUs
    shutil.copy(HOSTS / "synthetic-2s-8470q-amx" / "lscpu-p.txt", capture / "lscpu-p.txt")  # 208 CPUs
    (capture / "cgroup.txt").unlink()
    cpu = from_capture(capture)["cpu"]
    assert (cpu["online_cpus"], cpu["logical_cpus"], cpu["physical_cores"]) == (144, 144, 72)
    assert "lscpu-p.txt lists CPUs 144-207 missing from lscpu's on-line list" in cpu["physical_cores_basis"]


def test_cut_cpuinfo_drops_its_last_block():
    text = (HOSTS / "synthetic-2s-8470q-amx" / "cpuinfo.txt").read_text()
    blocks, rows = parse_cpuinfo(text)
    assert len(blocks) == len(rows) == 208
    cut = text[: text.index("core id", text.index("processor\t: 176"))]
    blocks, rows = parse_cpuinfo(cut)
    assert [row.cpu for row in rows] == list(range(176))
