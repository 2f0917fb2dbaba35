"""The `gpus` section from `nvidia-smi --query-gpu` CSV, falling back to `nvidia-smi -q -x`."""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET

QUERY_FIELDS = [
    "index",
    "name",
    "uuid",
    "memory.total",
    "memory.used",
    "compute_cap",
    "driver_version",
    "pci.bus_id",
]


def gpu_facts(files: dict[str, str]) -> tuple[list[dict], dict]:
    """(gpus, {"driver_version", "cuda_version"})."""
    gpus = _from_csv(files.get("nvidia-smi-query.csv")) or _from_xml(files.get("nvidia-smi-q.xml"))
    gpus = [gpu for gpu in gpus if gpu["name"] and gpu["index"] is not None]
    driver = {"driver_version": None, "cuda_version": None}
    xml_root = _xml_root(files.get("nvidia-smi-q.xml"))
    if xml_root is not None:
        driver = {
            "driver_version": xml_root.findtext("driver_version"),
            "cuda_version": xml_root.findtext("cuda_version"),
        }
    if gpus and not driver["driver_version"]:
        driver["driver_version"] = gpus[0]["driver_version"]
    _add_topology(gpus, files.get("nvidia-smi-topo.txt"))
    return gpus, driver if gpus else {"driver_version": None, "cuda_version": None}


def _from_csv(text: str | None) -> list[dict]:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if len(lines) < 2:
        return []
    reader = csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True)
    header = [re.sub(r"\s*\[.*\]$", "", column.strip()) for column in next(reader)]
    gpus = []
    for values in reader:
        row = dict(zip(header, (v.strip() for v in values), strict=False))
        gpus.append(
            _gpu(
                index=row.get("index"),
                name=row.get("name"),
                memory_mib=row.get("memory.total"),
                memory_used_mib=row.get("memory.used"),
                compute_capability=row.get("compute_cap"),
                driver_version=row.get("driver_version"),
                uuid=row.get("uuid"),
                pci_bus_id=row.get("pci.bus_id"),
            )
        )
    return gpus


def _from_xml(text: str | None) -> list[dict]:
    root = _xml_root(text)
    if root is None:
        return []
    gpus = []
    for position, gpu in enumerate(root.findall("gpu")):
        gpus.append(
            _gpu(
                index=gpu.findtext("minor_number") or str(position),
                name=gpu.findtext("product_name"),
                memory_mib=gpu.findtext("fb_memory_usage/total"),
                memory_used_mib=gpu.findtext("fb_memory_usage/used"),
                compute_capability=gpu.findtext("compute_capability"),
                driver_version=root.findtext("driver_version"),
                uuid=gpu.findtext("uuid"),
                pci_bus_id=gpu.get("id"),
            )
        )
    return gpus


def _gpu(**raw: str | None) -> dict:
    def mib(value: str | None) -> int | None:
        match = re.match(r"\s*(\d+)", value or "")
        return int(match.group(1)) if match else None

    def text(value: str | None) -> str | None:
        value = (value or "").strip()
        return None if value in ("", "N/A", "[N/A]") else value

    index = mib(raw["index"])
    return {
        "index": index,
        "name": text(raw["name"]),
        "memory_mib": mib(raw["memory_mib"]),
        "compute_capability": text(raw["compute_capability"]),
        "driver_version": text(raw["driver_version"]),
        "memory_used_mib": mib(raw["memory_used_mib"]),
        "uuid": text(raw["uuid"]),
        "pci_bus_id": text(raw["pci_bus_id"]),
        "numa_affinity": None,
        "cpu_affinity": None,
        "links": {},
    }


def _xml_root(text: str | None) -> ET.Element | None:
    if not text or not text.strip():
        return None
    try:
        return ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", text))
    except ET.ParseError:
        return None


def _add_topology(gpus: list[dict], text: str | None) -> None:
    """Fill links/affinities from `nvidia-smi topo -m` (tab-separated, header wrapped in ANSI codes)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in (text or "").splitlines()]
    if not lines or not gpus:
        return
    peers = [c.strip() for c in lines[0].split("\t") if re.fullmatch(r"(GPU|NIC)\d+", c.strip())]
    by_index = {f"GPU{gpu['index']}": gpu for gpu in gpus}
    for line in lines[1:]:
        fields = line.split("\t")
        gpu = by_index.get(fields[0].strip())
        if gpu is None or len(fields) < 1 + len(peers):
            continue
        links = [f.strip() for f in fields[1 : 1 + len(peers)]]
        gpu["links"] = {peer: link for peer, link in zip(peers, links, strict=True) if link != "X"}
        rest = [f.strip() for f in fields[1 + len(peers) :] if f.strip()]
        if rest:
            gpu["cpu_affinity"] = None if rest[0] == "N/A" else rest[0]
        if len(rest) > 1:
            gpu["numa_affinity"] = None if rest[1] == "N/A" else _int_or_none(rest[1])


def _int_or_none(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None
