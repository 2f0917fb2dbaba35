"""One parser for both a capture folder and the live host: file name -> text in, facts schema 1 out."""

from __future__ import annotations

from collections.abc import Mapping

from ktinfra.facts.cgroup import parse_cgroup
from ktinfra.facts.cpu import cpu_facts
from ktinfra.facts.gpus import cuda_visible, gpu_facts
from ktinfra.facts.system import (
    container_evidence,
    df_rows,
    disk_facts,
    init_name,
    memory_facts,
    os_facts,
    tuning_facts,
)

SCHEMA = 1


def parse_files(files: Mapping[str, str | None], source: str) -> dict:
    files = {name: text for name, text in files.items() if text is not None}
    limits = parse_cgroup(files.get("cgroup.txt"))
    cpu = cpu_facts(files, limits)
    gpus, nvidia = gpu_facts(files)
    gpus, visible = cuda_visible(gpus, files.get("cuda-visible-devices.txt"))
    disks, shm = disk_facts(df_rows(files.get("df.txt")))
    evidence = container_evidence(files, limits.quota_cpus, cpu["online_cpus"], disks)
    return {
        "schema": SCHEMA,
        "source": source,
        "cpu": cpu,
        "memory": memory_facts(files, limits),
        "gpus": gpus,
        "nvidia": nvidia,
        "cuda_visible_devices": visible,
        "container": any(not reason.startswith("ignored:") for reason in evidence),
        "container_evidence": evidence,
        "init": init_name(files),
        "os": os_facts(files),
        "disks": disks,
        "shm_bytes": shm,
        "tuning": tuning_facts(files),
    }
