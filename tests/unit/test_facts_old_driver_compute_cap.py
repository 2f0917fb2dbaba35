"""Drivers before R510 refuse the whole `nvidia-smi --query-gpu` when it names compute_cap ('Field
"compute_cap" is not a valid field to query.', exit 2): live facts lost every GPU the CSV held.

A real old driver cannot run on a test machine (no GPU here, and one driver per host): the live tests put a
stand-in `nvidia-smi` (a shell script) first on PATH under tmp_path that refuses compute_cap as R470 does;
a synthetic capture (r470_capture) is the real 2xh200-xeon-amx-32c one with its GPU files replaced by
two A100-SXM4-80GB as an R470 driver (470.182.03) reports them through that fallback (hand-written in the
real files' layout; the topo without the GPU NUMA ID column older drivers lack; no -q -x, no -L). It is
made under tmp_path, not kept in tests/fixtures/hosts, where every capture needs an entry in the plan and
render tests' tables."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ktinfra import facts as host_facts
from ktinfra.facts.gpu_names import capability_from_name

H200X2 = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "2xh200-xeon-amx-32c"
R470_CSV = (
    "# ktinfra facts: this driver refused --query-gpu with compute_cap; asked again without it\n"
    "index, name, uuid, memory.total [MiB], memory.used [MiB], driver_version, pci.bus_id, mig.mode.current\n"
    "0, NVIDIA A100-SXM4-80GB, GPU-eba1675f-80ed-12b2-82e6-e05e0cb93f6f, 81251 MiB, 0 MiB, 470.182.03, "
    "00000000:00:06.0, Disabled\n"
    "1, NVIDIA A100-SXM4-80GB, GPU-59fc4ea4-fb9d-8328-bbc3-2a0c069a1545, 81251 MiB, 0 MiB, 470.182.03, "
    "00000000:00:07.0, Disabled\n"
)
R470_TOPO = (
    "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\x1b[0m\n"
    "GPU0\t X \tNV12\t0-31\t0\n"
    "GPU1\tNV12\t X \t0-31\t0\n"
    "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
)


@pytest.fixture
def r470_capture(tmp_path) -> Path:
    capture = tmp_path / "r470"
    shutil.copytree(H200X2, capture, ignore=shutil.ignore_patterns("nvidia-smi-*"))
    (capture / "nvidia-smi-query.csv").write_text(R470_CSV)
    (capture / "nvidia-smi-topo.txt").write_text(R470_TOPO)
    return capture


SCRIPT = r"""#!/bin/sh
echo "$*" >> "$SMI_LOG"
case "$1" in
  --query-gpu=*compute_cap*) echo 'Field "compute_cap" is not a valid field to query.'; exit 2;;
  --query-gpu=*mig.mode.current*)
    echo "index, name, uuid, memory.total [MiB], memory.used [MiB], driver_version, pci.bus_id, \
mig.mode.current"
    echo "0, $SMI_NAME, GPU-eba1675f-80ed-12b2-82e6-e05e0cb93f6f, 81251 MiB, 0 MiB, 470.182.03, \
00000000:00:06.0, Disabled"
    ;;
  *) exit 9;;
esac
"""


@pytest.fixture
def old_smi(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text(SCRIPT)
    (bindir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("SMI_LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("SMI_NAME", "NVIDIA A100-SXM4-80GB")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return tmp_path / "calls.log"


def test_live_facts_keep_the_gpus_of_a_driver_that_refuses_compute_cap(old_smi):
    facts = host_facts.gather_live()
    assert [(g["index"], g["name"], g["memory_mib"], g["compute_capability"]) for g in facts["gpus"]] == [
        (0, "NVIDIA A100-SXM4-80GB", 81251, "8.0")
    ]
    assert facts["nvidia"]["driver_version"] == "470.182.03"
    queries = [line for line in old_smi.read_text().splitlines() if line.startswith("--query-gpu")]
    assert "compute_cap" in queries[0] and "compute_cap" not in queries[-1]
    assert "mig.mode.current" in queries[-1]  # R450+ knows MIG: only compute_cap is left out


def test_the_capture_says_what_was_left_out(old_smi, tmp_path):
    host_facts.write_capture(tmp_path / "cap")
    csv = (tmp_path / "cap" / "nvidia-smi-query.csv").read_text()
    assert csv.splitlines()[0] == (
        "# ktinfra facts: this driver refused --query-gpu with compute_cap; asked again without it"
    )
    assert host_facts.from_capture(tmp_path / "cap")["gpus"][0]["compute_capability"] == "8.0"


def test_an_unknown_gpu_name_leaves_the_compute_capability_unknown(old_smi, monkeypatch):
    monkeypatch.setenv("SMI_NAME", "NVIDIA Future GPU 9000")
    gpus = host_facts.gather_live()["gpus"]
    assert [(g["name"], g["compute_capability"]) for g in gpus] == [("NVIDIA Future GPU 9000", None)]


def test_a_synthetic_r470_capture_reads_both_gpus_with_capability_from_the_name(r470_capture):
    facts = host_facts.from_capture(r470_capture)
    assert [(g["index"], g["compute_capability"], g["memory_mib"], g["mig"]) for g in facts["gpus"]] == [
        (0, "8.0", 81251, False),
        (1, "8.0", 81251, False),
    ]
    assert facts["gpus"][0]["links"] == {"GPU1": "NV12"}
    assert facts["nvidia"]["driver_version"] == "470.182.03"


@pytest.mark.parametrize(
    ("name", "capability"),
    [
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("A100-PCIE-40GB", "8.0"),
        ("NVIDIA A800 80GB PCIe", "8.0"),
        ("NVIDIA A30", "8.0"),
        ("NVIDIA A10", "8.6"),
        ("NVIDIA A10G", "8.6"),
        ("NVIDIA A40", "8.6"),
        ("NVIDIA RTX A6000", "8.6"),
        ("NVIDIA GeForce RTX 3090", "8.6"),
        ("Tesla T4", "7.5"),
        ("Quadro RTX 8000", "7.5"),
        ("NVIDIA GeForce RTX 2080 Ti", "7.5"),
        ("Tesla V100-SXM2-32GB", "7.0"),
        ("Tesla P100-PCIE-16GB", "6.0"),
        ("Tesla P40", "6.1"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA H20", "9.0"),
        ("NVIDIA GH200 480GB", "9.0"),
        ("NVIDIA L40S", "8.9"),
        ("NVIDIA GeForce RTX 4090", "8.9"),
        ("NVIDIA RTX 6000 Ada Generation", "8.9"),
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("NVIDIA B200", "10.0"),
        ("NVIDIA Future GPU 9000", None),
        ("", None),
        (None, None),
    ],
)
def test_capability_from_name(name, capability):
    assert capability_from_name(name) == capability
