"""`nvidia-smi topo -m` pads its affinity cells with tabs, and drivers differ. Driver 580 (the real H200
captures) writes "0-31\\t0\\t\\tN/A"; an older driver on a Tesla P4 wrote "GPU0\\t X \\t0-7\\t\\tN/A\\t\\tN/A"
(quoted in Project-HAMi/HAMi#99), two tabs after the CPU affinity. Read by tab position, the NUMA Affinity
column then held the empty cell between them: every GPU's numa_affinity was lost (null)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktinfra.facts import from_capture

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"

# the P4 report's table as printed (no NUMA node known there)
P4_REPORTED = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-7\t\tN/A\t\tN/A\n\nLegend:\n"
# SYNTHESIZED: the same driver's padding on the two-socket synthetic host, whose GPUs sit on nodes 0 and 1
OLD_PADDING_TWO_NODES = (
    "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tSYS\t0-51,104-155\t\t0\t\tN/A\n"
    "GPU1\tSYS\t X \t52-103,156-207\t\t1\t\tN/A\n"
    "\nLegend:\n"
)


def _capture(tmp_path: Path, host: str, topo: str) -> Path:
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / host, capture)
    (capture / "nvidia-smi-topo.txt").write_text(topo)
    return capture


def test_an_older_drivers_padding_keeps_each_gpus_numa_node(tmp_path):
    gpus = from_capture(_capture(tmp_path, "synthetic-2s-8470q-amx", OLD_PADDING_TWO_NODES))["gpus"]
    assert [(g["index"], g["cpu_affinity"], g["numa_affinity"], g["links"]) for g in gpus] == [
        (0, "0-51,104-155", 0, {"GPU1": "SYS"}),  # before: numa_affinity None
        (1, "52-103,156-207", 1, {"GPU0": "SYS"}),
    ]


def test_the_reported_p4_table_reads_its_cpu_affinity_and_no_numa_node(tmp_path):
    gpu = from_capture(_capture(tmp_path, "h100-xeon-amx-16c", P4_REPORTED))["gpus"][0]
    assert (gpu["cpu_affinity"], gpu["numa_affinity"], gpu["links"]) == ("0-7", None, {})


@pytest.mark.parametrize("host", ["2xh200-xeon-amx-32c", "4xh200-xeon-amx-64c"])
def test_the_real_580_tables_read_as_before(host):
    gpus = from_capture(HOSTS / host)["gpus"]
    assert {(g["cpu_affinity"], g["numa_affinity"]) for g in gpus} == {(g["cpu_affinity"], 0) for g in gpus}
    assert all(g["cpu_affinity"] for g in gpus)
