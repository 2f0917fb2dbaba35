"""MIG-enabled GPUs: a process gets one MIG instance, never the whole card. The synthetic captures
synthetic-h100-mig-2x3g (two 3g.40gb instances) and synthetic-h100-mig-none (MIG on, no instance) are the
real H100 capture with MIG switched on in its nvidia-smi files (their READMEs say SYNTHETIC)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktinfra.facts import capture as capture_module
from ktinfra.facts import from_capture, parse_files
from ktinfra.facts.gpus import QUERY_FIELDS, QUERY_FIELDS_BEFORE_MIG
from ktinfra.plan.host import validate

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
H100, MIG, MIG_NONE = "h100-xeon-amx-16c", "synthetic-h100-mig-2x3g", "synthetic-h100-mig-none"


def _copy(tmp_path: Path, host: str) -> Path:
    target = tmp_path / host
    shutil.copytree(HOSTS / host, target)
    return target


# --- facts --------------------------------------------------------------------------------------------


def test_mig_instances_are_the_memory_a_process_can_use():
    (gpu,) = from_capture(HOSTS / MIG)["gpus"]
    assert (gpu["index"], gpu["mig"], gpu["memory_mib"]) == (0, True, 40192)  # the card says 81559
    assert gpu["mig_devices"] == [
        {"index": n, "gpu_instance_id": n + 1, "compute_instance_id": 0, "multiprocessor_count": 60,
         "memory_mib": 40192}
        for n in (0, 1)
    ]  # fmt: skip
    assert gpu["compute_capability"] == "9.0" and gpu["uuid"] == "GPU-15ad6b29-6927-2cac-9589-94c4a88d0418"


def test_the_real_h100_capture_has_mig_off():
    (gpu,) = from_capture(HOSTS / H100)["gpus"]  # a CSV without mig.mode.current; the XML says Disabled
    assert (gpu["mig"], gpu["mig_devices"], gpu["memory_mib"]) == (False, [], 81559)


def test_mig_on_without_instances_leaves_no_memory():
    (gpu,) = from_capture(HOSTS / MIG_NONE)["gpus"]
    assert (gpu["mig"], gpu["mig_devices"], gpu["memory_mib"]) == (True, [], 0)


def test_mig_from_the_xml_alone(tmp_path):
    capture = _copy(tmp_path, MIG)
    (capture / "nvidia-smi-query.csv").unlink()
    (gpu,) = from_capture(capture)["gpus"]
    assert (gpu["mig"], len(gpu["mig_devices"]), gpu["memory_mib"]) == (True, 2, 40192)


def test_mig_from_the_csv_alone_is_memory_unknown(tmp_path):
    capture = _copy(tmp_path, MIG)
    (capture / "nvidia-smi-q.xml").unlink()
    (gpu,) = from_capture(capture)["gpus"]
    # the CSV's memory.total is the card's 81559 MiB, which no process can have
    assert (gpu["mig"], gpu["mig_devices"], gpu["memory_mib"]) == (True, None, None)


def test_the_largest_instance_counts_and_unreadable_instance_memory_is_unknown(tmp_path):
    capture = _copy(tmp_path, MIG)
    xml = capture / "nvidia-smi-q.xml"
    smaller = xml.read_text().replace("<total>40192 MiB</total>", "<total>19968 MiB</total>", 1)  # 2g.20gb
    xml.write_text(smaller)
    (gpu,) = from_capture(capture)["gpus"]
    assert [d["memory_mib"] for d in gpu["mig_devices"]] == [19968, 40192] and gpu["memory_mib"] == 40192
    xml.write_text(smaller.replace("<total>40192 MiB</total>", f"<total>{'9' * 400} MiB</total>", 1))
    facts = from_capture(capture)
    (gpu,) = facts["gpus"]
    assert [d["memory_mib"] for d in gpu["mig_devices"]] == [19968, None] and gpu["memory_mib"] == 19968
    validate(facts)


@pytest.mark.parametrize("fields", [QUERY_FIELDS, QUERY_FIELDS_BEFORE_MIG])
def test_a_headerless_csv_of_either_query_is_read(fields):
    row = "0, NVIDIA A100-SXM4-80GB, GPU-1, 81920 MiB, 0 MiB, 8.0, 550.54.15, 00000000:07:00.0"
    if fields is QUERY_FIELDS:
        row += ", Enabled"
    (gpu,) = parse_files({"nvidia-smi-query.csv": row + "\n"}, "x")["gpus"]
    assert (gpu["name"], gpu["mig"]) == ("NVIDIA A100-SXM4-80GB", True if fields is QUERY_FIELDS else None)
    assert gpu["memory_mib"] == (None if fields is QUERY_FIELDS else 81920)


@pytest.mark.parametrize(
    "value, mig", [("Disabled", False), ("[N/A]", False), ("Enabled", True), ("x", None)]
)
def test_csv_mig_mode_values(value, mig):
    csv = f"index, name, memory.total [MiB], mig.mode.current\n0, NVIDIA X, 1000 MiB, {value}\n"
    (gpu,) = parse_files({"nvidia-smi-query.csv": csv}, "x")["gpus"]
    assert gpu["mig"] is mig


def test_capture_queries_mig_mode_and_falls_back_for_an_old_driver(monkeypatch):
    asked = []

    def run(argv, **_):
        asked.append(argv)
        return None if "mig.mode.current" in argv[1] else "index, name\n0, GPU\n"

    monkeypatch.setattr(capture_module, "_run", run)
    assert capture_module.SOURCES["nvidia-smi-query.csv"]() == "index, name\n0, GPU\n"
    assert [argv[1] for argv in asked] == [
        "--query-gpu=" + ",".join(QUERY_FIELDS),
        "--query-gpu=" + ",".join(QUERY_FIELDS_BEFORE_MIG),
    ]
    assert QUERY_FIELDS[-1] == "mig.mode.current"
