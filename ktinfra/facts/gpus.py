"""The `gpus` section from `nvidia-smi --query-gpu` CSV, falling back to `nvidia-smi -q -x`."""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET

from ktinfra.facts.bounds import MAX_GPU_INDEX, MAX_GPU_MEMORY_MIB, MAX_GPU_MULTIPROCESSORS, within

QUERY_FIELDS = [
    "index",
    "name",
    "uuid",
    "memory.total",
    "memory.used",
    "compute_cap",
    "driver_version",
    "pci.bus_id",
    "mig.mode.current",  # last: a header-less CSV of a capture made before it was queried is the rest
]
QUERY_FIELDS_BEFORE_MIG = QUERY_FIELDS[:-1]


def gpu_facts(files: dict[str, str]) -> tuple[list[dict], dict]:
    """(gpus, {"driver_version", "cuda_version"}).

    The CSV is read first; `nvidia-smi -q -x` fills what it lacks: GPUs the CSV has no valid row for (junk or
    a cut-off file), and empty fields of the GPUs both list (matched by UUID, then PCI bus id). The XML has no
    compute capability on current drivers: a GPU known from the XML alone takes it from a GPU of the same
    name in the CSV, else keeps null (unknown).

    MIG: `mig` is true when MIG mode is on (CSV `mig.mode.current` or the XML's `mig_mode/current_mig`),
    `mig_devices` lists the instances (XML only), and `memory_mib` is then what one process can use: the
    largest instance's memory (0 with no instance, null when the instances are unknown), not the card's.
    """
    from_csv = [gpu for gpu in _from_csv(files.get("nvidia-smi-query.csv")) if _valid(gpu)]
    from_xml = [gpu for gpu in _from_xml(files.get("nvidia-smi-q.xml")) if _valid(gpu)]
    gpus = _merge(from_csv, from_xml)
    driver = {"driver_version": None, "cuda_version": None}
    xml_root = _xml_root(files.get("nvidia-smi-q.xml"))
    if xml_root is not None:
        driver = {
            "driver_version": _text(xml_root.findtext("driver_version")),
            "cuda_version": _text(xml_root.findtext("cuda_version")),
        }
    if gpus and not driver["driver_version"]:
        driver["driver_version"] = next(
            (gpu["driver_version"] for gpu in gpus if gpu["driver_version"]), None
        )
    _add_topology(gpus, files.get("nvidia-smi-topo.txt"))
    for gpu in gpus:
        _mig_memory(gpu)
    return gpus, driver if gpus else {"driver_version": None, "cuda_version": None}


def _mig_memory(gpu: dict) -> None:
    """A MIG-enabled GPU's memory_mib: a process gets one instance (CUDA shows it one), not the card."""
    if gpu["mig"] is not True:
        return
    devices = gpu["mig_devices"]
    if devices is None:  # MIG on, instances not captured (CSV without the XML)
        gpu["memory_mib"] = None
        return
    sizes = [device["memory_mib"] for device in devices if device["memory_mib"] is not None]
    gpu["memory_mib"] = max(sizes) if sizes else (0 if not devices else None)


def _valid(gpu: dict) -> bool:
    return bool(gpu["name"]) and gpu["index"] is not None


def _merge(primary: list[dict], extra: list[dict]) -> list[dict]:
    """GPUs of `primary`, empty fields filled from the same GPU in `extra`, then the GPUs only `extra` has."""

    def keys(gpu: dict) -> set[tuple[str, str]]:
        return {(key, gpu[key].upper()) for key in ("uuid", "pci_bus_id") if gpu[key]}

    merged: list[dict] = []
    used: set[int] = set()
    for gpu in primary:
        match = next((n for n, other in enumerate(extra) if n not in used and keys(gpu) & keys(other)), None)
        if match is not None:
            used.add(match)
            gpu = {key: extra[match][key] if value is None else value for key, value in gpu.items()}
        merged.append(gpu)
    taken = {gpu["index"] for gpu in merged}
    for n, gpu in enumerate(extra):
        if n not in used and gpu["index"] not in taken:
            merged.append(gpu)
            taken.add(gpu["index"])
    # the compute capability belongs to the chip: a GPU the CSV missed takes it from one of the same name
    capability = {gpu["name"]: gpu["compute_capability"] for gpu in merged if gpu["compute_capability"]}
    for gpu in merged:
        if gpu["compute_capability"] is None:
            gpu["compute_capability"] = capability.get(gpu["name"])
    return sorted(merged, key=lambda gpu: gpu["index"])


def _names(values: list[str]) -> list[str]:
    """Header cells without their unit ("memory.total [MiB]")."""
    return [re.sub(r"\s*\[.*\]$", "", value.strip()) for value in values]


def _from_csv(text: str | None) -> list[dict]:
    """Rows of `nvidia-smi --query-gpu ... --format=csv` after its header line.

    Lines before the header (nvidia-smi prints some warnings, such as a corrupt infoROM, on stdout) are
    skipped; a row is kept only with as many fields as the header and a number for its index. Without a
    header (`--format=csv,noheader`) the columns are taken to be QUERY_FIELDS, the capture's own query.
    """
    try:
        clean = (text or "").replace("\0", "").replace("\ufeff", "")
        lines = list(csv.reader(io.StringIO(clean), skipinitialspace=True))
    except csv.Error:
        return []
    header: list[str] | None = None
    headerless = not any("index" in cells and "name" in cells for cells in (_names(v) for v in lines))
    gpus = []
    for values in lines:
        cells = [value.strip() for value in values]
        if headerless:  # this capture's query, or the one before mig.mode.current was added
            header = next((f for f in (QUERY_FIELDS, QUERY_FIELDS_BEFORE_MIG) if len(f) == len(cells)), None)
            if header is None:
                continue
        elif header is None:
            names = _names(values)
            if "index" in names and "name" in names:
                header = names
            continue
        if len(cells) != len(header):
            continue
        row = dict(zip(header, cells, strict=True))
        if not re.fullmatch(r"\d+", row["index"]):
            continue
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
                mig=row.get("mig.mode.current"),
                mig_devices=None,
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
                index=str(position),  # nvidia-smi's index is the listing order; minor_number is /dev/nvidiaN
                name=gpu.findtext("product_name"),
                memory_mib=gpu.findtext("fb_memory_usage/total"),
                memory_used_mib=gpu.findtext("fb_memory_usage/used"),
                compute_capability=gpu.findtext("compute_capability"),
                driver_version=root.findtext("driver_version"),
                uuid=gpu.findtext("uuid"),
                pci_bus_id=gpu.get("id"),
                mig=gpu.findtext("mig_mode/current_mig"),
                mig_devices=_mig_devices(gpu),
            )
        )
    return gpus


def _mig_devices(gpu: ET.Element) -> list[dict] | None:
    """`mig_devices/mig_device` of `nvidia-smi -q -x` (none: the element holds "None"); None without it."""
    block = gpu.find("mig_devices")
    if block is None:
        return None
    devices = []
    for device in block.findall("mig_device"):
        index = _number(device.findtext("index"), 0, MAX_GPU_INDEX)
        if index is None:
            continue
        sms = device.findtext("device_attributes/shared/multiprocessor_count")
        devices.append(
            {
                "index": index,
                "gpu_instance_id": _number(device.findtext("gpu_instance_id"), 0, MAX_GPU_INDEX),
                "compute_instance_id": _number(device.findtext("compute_instance_id"), 0, MAX_GPU_INDEX),
                "multiprocessor_count": _number(sms, 1, MAX_GPU_MULTIPROCESSORS),
                "memory_mib": _number(device.findtext("fb_memory_usage/total"), 1, MAX_GPU_MEMORY_MIB),
            }
        )
    return devices


def _mig_mode(value: str | None) -> bool | None:
    """MIG mode as nvidia-smi prints it: Enabled, Disabled, or N/A / [N/A] on GPUs without MIG (off)."""
    text = (value or "").strip().strip("[]").lower()
    if text == "enabled":
        return True
    if text in ("disabled", "n/a", "not supported"):
        return False
    return None


def _number(value: str | None, low: int, high: int) -> int | None:
    match = re.match(r"\s*(\d{1,20})(?!\d)", value or "")
    return within(int(match.group(1)), low, high) if match else None


def _gpu(mig_devices: list[dict] | None, **raw: str | None) -> dict:
    number, text = _number, _text
    return {
        "index": number(raw["index"], 0, MAX_GPU_INDEX),
        "name": text(raw["name"]),
        "memory_mib": number(raw["memory_mib"], 1, MAX_GPU_MEMORY_MIB),
        "compute_capability": text(raw["compute_capability"]),
        "driver_version": text(raw["driver_version"]),
        "memory_used_mib": number(raw["memory_used_mib"], 0, MAX_GPU_MEMORY_MIB),
        "uuid": text(raw["uuid"]),
        "pci_bus_id": text(raw["pci_bus_id"]),
        "numa_affinity": None,
        "cpu_affinity": None,
        "links": {},
        "mig": _mig_mode(raw["mig"]),
        "mig_devices": mig_devices,
    }


def _text(value: str | None) -> str | None:
    value = (value or "").strip()
    return None if value in ("", "N/A", "[N/A]") or value.startswith("[") else value


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
