"""MIG-enabled GPUs: a process gets one MIG instance, never the whole card. The synthetic captures
synthetic-h100-mig-2x3g (two 3g.40gb instances) and synthetic-h100-mig-none (MIG on, no instance) are the
real H100 capture with MIG switched on in its nvidia-smi files and an `nvidia-smi -L` listing added (their
READMEs say SYNTHETIC). How the instance is selected by its UUID: tests/unit/test_mig_uuid.py."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest

from ktinfra.facts import capture as capture_module
from ktinfra.facts import from_capture, parse_files
from ktinfra.facts.gpus import QUERY_FIELDS, QUERY_FIELDS_BEFORE_MIG
from ktinfra.plan.host import FactsError, validate
from ktinfra.planner import PlanInputError, plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
H100, MIG, MIG_NONE = "h100-xeon-amx-16c", "synthetic-h100-mig-2x3g", "synthetic-h100-mig-none"
MODEL = "Qwen3-30B-A3B"


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
         "memory_mib": 40192, "profile": "3g.40gb", "uuid": uuid}  # profile, uuid: its nvidia-smi -L
        for n, uuid in enumerate(
            ("MIG-978553c0-9f55-5ab9-b2cd-da525c211123", "MIG-d9d7d000-7324-555b-9b15-aa9d35017479")
        )
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
    # the capture says which field the driver refused (readers skip lines before the CSV header)
    note = "# ktinfra facts: this driver refused --query-gpu with mig.mode.current; asked again without it\n"
    assert capture_module.SOURCES["nvidia-smi-query.csv"]() == note + "index, name\n0, GPU\n"
    assert [argv[1] for argv in asked] == [
        "--query-gpu=" + ",".join(QUERY_FIELDS),
        "--query-gpu=" + ",".join(QUERY_FIELDS_BEFORE_MIG),
    ]
    assert QUERY_FIELDS[-1] == "mig.mode.current"


# --- plan ---------------------------------------------------------------------------------------------


def test_serving_on_a_mig_instance_is_sized_for_the_instance():
    whole = plan(from_capture(HOSTS / H100), MODEL, "serve")
    result = plan(from_capture(HOSTS / MIG), MODEL, "serve")
    serve = result["serve"]
    assert whole["serve"]["kt_num_gpu_experts"] == 128  # every expert fits on 80 GB
    # static = 0.92 x 40192 MiB = 38,772,817,264 B (reserve 8 % = 3.37 GB, within 1.5-8 GB);
    # - 3,081,764,864 non-expert weights - 32 requests x 4096 tokens x 98,304 B KV = 12,884,901,888
    # - one MoE layer for layerwise prefill 128 x 9,437,184 = 1,207,959,552 leaves 21,598,191,000;
    # one expert in all 48 MoE layers is 48 x 9,437,184 = 452,984,832 B -> 47.68 -> 47
    assert serve["kt_num_gpu_experts"] == 47
    assert (serve["mem_fraction_static"], serve["tensor_parallel_size"], serve["gpu_indices"]) == (
        0.92,
        1,
        [0],
    )
    assert result["host"]["gpus"][0]["memory_mib"] == 40192
    (warning,) = [w for w in result["warnings"] if "MIG" in w]
    assert warning.startswith(
        "GPU 0 (NVIDIA H100 80GB HBM3) is MIG-partitioned into 2 instance(s): planning on its largest "
        "instance, MIG device 0 (3g.40gb, GPU instance 1, 60 SMs), 40192 MiB, not the whole card"
    )
    # the plan names the instance (serve.mig_uuids, tests/unit/test_mig_uuid.py): nothing left to do by hand
    assert "no tensor-parallel ranks span instances" in warning and "serve.mig_uuids names" in warning


def test_fine_tuning_on_a_mig_instance_warns_too():
    result = plan(from_capture(HOSTS / MIG), MODEL, "sft")
    assert result["sft"]["gpu_indices"] == [0]
    assert any("MIG-partitioned" in w and "no data-parallel ranks" in w for w in result["warnings"])


@pytest.mark.parametrize("mode", ["serve", "sft"])
def test_mig_without_instances_is_a_problem_not_a_full_card(mode):
    result = plan(from_capture(HOSTS / MIG_NONE), MODEL, mode)
    assert not result["feasible"]
    assert result["problems"][0].startswith(
        "GPU 0 (NVIDIA H100 80GB HBM3) has MIG enabled without MIG instances: no usable GPU memory"
    )
    if mode == "serve":
        assert result["serve"]["kt_num_gpu_experts"] is None and result["serve"]["gpu_indices"] is None


def test_mig_with_unknown_instances_is_a_problem(tmp_path):
    capture = _copy(tmp_path, MIG)
    (capture / "nvidia-smi-q.xml").unlink()
    result = plan(from_capture(capture), MODEL, "serve")
    assert not result["feasible"]
    assert "the facts do not list its MIG instances" in result["problems"][0]


def test_mig_instances_listed_without_memory_are_named_as_such(tmp_path):
    """Before: instances listed with N/A memory were reported as 'the facts do not list its MIG instances'."""
    capture = _copy(tmp_path, MIG)
    xml = capture / "nvidia-smi-q.xml"
    xml.write_text(xml.read_text().replace("<total>40192 MiB</total>", "<total>N/A</total>"))
    result = plan(from_capture(capture), MODEL, "serve")
    assert not result["feasible"]
    assert "has MIG enabled and none of its MIG instances reports memory" in result["problems"][0]


def _two_mig_h200s() -> dict:
    facts = from_capture(HOSTS / "2xh200-xeon-amx-32c")
    for gpu in facts["gpus"]:  # each H200 split into two 4g.71gb instances
        gpu.update(
            mig=True,
            memory_mib=71424,
            mig_devices=[{"index": n, "memory_mib": 71424, "gpu_instance_id": n + 1} for n in (0, 1)],
        )
    return facts


def test_no_tensor_parallel_over_mig_instances():
    whole = plan(from_capture(HOSTS / "2xh200-xeon-amx-32c"), "Qwen3-235B-A22B", "serve")
    assert whole["serve"]["tensor_parallel_size"] == 2
    result = plan(_two_mig_h200s(), "Qwen3-235B-A22B", "serve")
    assert (result["serve"]["tensor_parallel_size"], result["serve"]["gpu_indices"]) == (1, [0])
    assert "tensor-parallel ranks cannot span MIG instances" in result["reasons"]["gpu_indices"]
    sft = plan(_two_mig_h200s(), MODEL, "sft")
    assert sft["sft"]["gpu_indices"] == [0] and sft["sft"]["launcher"]["num_processes"] == 1


def test_a_usable_gpu_is_chosen_over_a_mig_gpu_without_instances():
    facts = from_capture(HOSTS / "2xh200-xeon-amx-32c")
    facts["gpus"][0].update(mig=True, memory_mib=0, mig_devices=[])
    result = plan(facts, MODEL, "serve")
    assert result["feasible"] and result["serve"]["gpu_indices"] == [1]
    assert "MIG enabled without usable instances (0)" in result["reasons"]["gpu_indices"]


# --- the facts contract ---------------------------------------------------------------------------------


def test_facts_with_mig_pass_the_contract_check():
    for host in (MIG, MIG_NONE):
        validate(from_capture(HOSTS / host))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"mig": False, "memory_mib": 0}, "gpus[0].memory_mib must be a positive integer"),
        ({"mig": "yes"}, "gpus[0].mig must be true, false or null"),
        ({"mig_devices": [{"memory_mib": 1}]}, "facts lack gpus[0].mig_devices[0].index"),
        ({"mig_devices": [{"index": 0, "memory_mib": 0}]}, "gpus[0].mig_devices[0].memory_mib must be"),
        ({"mig_devices": [{"index": 0, "multiprocessor_count": 1 << 17}]}, "multiprocessor_count must be"),
        ({"mig_devices": [5]}, "gpus[0].mig_devices[0] must be an object"),
    ],
)
def test_bad_mig_keys_are_refused(change, message):
    facts = copy.deepcopy(from_capture(HOSTS / MIG))
    facts["gpus"][0].update(change)
    with pytest.raises(FactsError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate(facts)
    with pytest.raises(PlanInputError):
        plan(facts, MODEL, "serve")
