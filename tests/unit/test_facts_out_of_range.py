"""Captures holding numbers no real host reports (400 digits, 0 bytes of RAM, a negative Avail): the
parsers read them as unknown (or, for df's negative Avail, as nothing free), and facts/plan neither crash on
float arithmetic nor emit values the facts contract rejects."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ktinfra.facts import from_capture
from ktinfra.plan.host import validate
from ktinfra.planner import PlanInputError, load_facts, plan

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
HUGE = "9" * 400
H100 = "h100-xeon-amx-16c"


def _capture(tmp_path: Path, name: str, edit: str, pattern: str, replacement: str) -> Path:
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / H100, capture)
    path = capture / name
    text, count = re.subn(pattern, replacement, path.read_text(), flags=re.MULTILINE)
    assert count, f"{edit}: {pattern!r} not in {name}"
    path.write_text(text)
    return capture


def _ktinfra(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True, env=env)


CASES = [
    # (what, file, pattern, replacement, dotted key in the facts, value read)
    (
        "MemTotal of 400 digits",
        "meminfo.txt",
        r"^MemTotal:.*$",
        f"MemTotal: {HUGE} kB",
        "memory.total_bytes",
        None,
    ),
    ("MemTotal 0", "meminfo.txt", r"^MemTotal:.*$", "MemTotal: 0 kB", "memory.total_bytes", None),
    (
        "MemAvailable of 400 digits",
        "meminfo.txt",
        r"^MemAvailable:.*$",
        f"MemAvailable: {HUGE} kB",
        "memory.available_bytes",
        None,
    ),
    (
        "threads per core of 400 digits",
        "lscpu.txt",
        r"^Thread\(s\) per core:.*$",
        f"Thread(s) per core: {HUGE}",
        "cpu.threads_per_core",
        1,
    ),  # the per-CPU listing still tells
    (
        "cpu.max quota of 400 digits",
        "cgroup.txt",
        r"\Z",
        f"/sys/fs/cgroup/cpu.max: {HUGE} 100000\n",
        "cpu.quota_cpus",
        None,
    ),
    (
        "memory.max of 400 digits",
        "cgroup.txt",
        r"\Z",
        f"/sys/fs/cgroup/memory.max: {HUGE}\n",
        "memory.cgroup_limit_bytes",
        None,
    ),
    (
        "negative df Avail",
        "df.txt",
        r"^(/dev/vda +ext4 +\d+ +\d+ +)\d+",
        r"\g<1>-5",
        "disks.0.avail_bytes",
        0,
    ),
    (
        "df Avail of 400 digits",
        "df.txt",
        r"^(/dev/vda +ext4 +\d+ +\d+ +)\d+",
        rf"\g<1>{HUGE}",
        "disks.0.avail_bytes",
        None,
    ),
]


def _get(facts: dict, dotted: str):
    node = facts
    for part in dotted.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


@pytest.mark.parametrize("what,name,pattern,replacement,key,expected", CASES, ids=[c[0] for c in CASES])
def test_a_number_no_host_reports_is_read_as_unknown(
    tmp_path, what, name, pattern, replacement, key, expected
):
    capture = _capture(tmp_path, name, what, pattern, replacement)
    facts = from_capture(capture)
    assert _get(facts, key) == expected
    tables = _ktinfra("facts", "--from", str(capture))
    assert tables.returncode == 0, tables.stderr
    assert "Host facts" in tables.stdout
    if facts["memory"]["total_bytes"] is not None:
        validate(facts)  # what facts --from writes, the contract accepts


def test_a_gpu_memory_no_gpu_has_falls_back_to_the_xml_or_is_unknown(tmp_path):
    capture = _capture(tmp_path, "nvidia-smi-query.csv", "GPU memory", r"81559 MiB", f"{HUGE} MiB")
    assert from_capture(capture)["gpus"][0]["memory_mib"] == 81559  # nvidia-smi -q -x says so
    (capture / "nvidia-smi-q.xml").unlink()
    assert from_capture(capture)["gpus"][0]["memory_mib"] is None
    (capture / "nvidia-smi-query.csv").write_text(
        (HOSTS / H100 / "nvidia-smi-query.csv").read_text().replace("81559 MiB", "0 MiB")
    )
    assert from_capture(capture)["gpus"][0]["memory_mib"] is None


def test_plan_from_a_capture_without_usable_ram_names_the_capture(tmp_path):
    capture = _capture(tmp_path, "meminfo.txt", "MemTotal 0", r"^MemTotal:.*$", "MemTotal: 0 kB")
    done = _ktinfra("plan", "-m", "Qwen3-30B-A3B", "--from", str(capture), "--json")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "error: facts lack memory.total_bytes (a positive integer up to 2^60); "
        f"the capture {capture} does not give it (a file missing or damaged)"
    )


def test_plan_from_a_capture_with_a_quota_of_400_digits_plans_without_a_quota(tmp_path):
    capture = _capture(tmp_path, "cgroup.txt", "quota", r"\Z", f"/sys/fs/cgroup/cpu.max: {HUGE} 100000\n")
    done = _ktinfra("plan", "-m", "Qwen3-30B-A3B", "--from", str(capture), "--json")
    assert done.returncode in (0, 2), done.stderr
    assert json.loads(done.stdout)["serve"]["kt_cpuinfer"] == 14


def test_a_full_disk_is_the_data_disk_and_a_problem(tmp_path):
    capture = _capture(tmp_path, "df.txt", "negative Avail", r"^(/dev/vda +ext4 +\d+ +\d+ +)\d+", r"\g<1>-5")
    result = plan(from_capture(capture), "Qwen3-30B-A3B", "serve")
    assert not result["feasible"]
    assert result["problems"] == [
        "needs 91.1 GB disk (61.1 GB download + 29.0 GB CPU weights + 1.0 GB outputs), / has 0.0 GB free"
    ]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_facts_file_with_nan_or_infinity_is_refused(tmp_path, constant):
    text = (FACTS / "h100-amx.json").read_text()
    text, count = re.subn(r'"container": (true|false)', f'"container": {constant}', text)
    assert count == 1
    (tmp_path / "facts.json").write_text(text)
    with pytest.raises(PlanInputError, match=f"is not JSON: {constant} is not a JSON number"):
        load_facts(tmp_path / "facts.json")
    done = _ktinfra("plan", "-m", "Qwen3-30B-A3B", "--facts", str(tmp_path / "facts.json"), "--json")
    assert done.returncode == 1 and done.stdout == ""
