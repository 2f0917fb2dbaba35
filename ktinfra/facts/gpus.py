"""The `gpus` section from `nvidia-smi --query-gpu` CSV, falling back to `nvidia-smi -q -x`."""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET

from ktinfra.facts.bounds import MAX_GPU_INDEX, MAX_GPU_MEMORY_MIB, MAX_GPU_MULTIPROCESSORS, within
from ktinfra.facts.gpu_names import capability_from_name

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
# drivers before R510 refuse the whole query for compute_cap ('Field "compute_cap" is not a valid field to
# query.'); those before R450 refuse mig.mode.current too
QUERY_FIELDS_BEFORE_COMPUTE_CAP = [field for field in QUERY_FIELDS if field != "compute_cap"]
QUERY_FIELDS_OLDEST = [field for field in QUERY_FIELDS_BEFORE_MIG if field != "compute_cap"]

# what `plan` accepts as a compute capability ("9.0", "12", "10.3"; at most 3 digits each side: real ones have
# 1-2, and a longer number is damage); a cell of another form is read as unknown
COMPUTE_CAPABILITY_RE = re.compile(r"\d{1,3}(\.\d{1,3})?")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
GPU_UUID = re.compile(rf"GPU-{_UUID}")
# A MIG device as CUDA_VISIBLE_DEVICES takes it: MIG-<uuid> (R470 and later), or MIG-GPU-<GPU uuid>/<GPU
# instance id>/<compute instance id> (R450/R460). fullmatch: no quote, comma or space can pass.
MIG_UUID = re.compile(rf"MIG-{_UUID}|MIG-(GPU-{_UUID})/(\d{{1,5}})/(\d{{1,5}})")
# `nvidia-smi -L`: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)", and under a MIG-enabled GPU one line per
# MIG device, "  MIG 3g.40gb     Device  0: (UUID: MIG-...)" (R450 writes one space: "MIG 3g.20gb Device 0:")
_LISTED_GPU = re.compile(r"GPU (\d{1,5}): .*\(UUID: ([^()\s]+)\)")
_LISTED_MIG = re.compile(r"\s+MIG ([0-9A-Za-z][0-9A-Za-z.+-]*)\s+Device\s+(\d{1,5}): \(UUID: ([^()\s]+)\)")


def gpu_facts(files: dict[str, str]) -> tuple[list[dict], dict]:
    """(gpus, {"driver_version", "cuda_version"}).

    The CSV is read first; `nvidia-smi -q -x` fills what it lacks: GPUs the CSV has no valid row for (junk or
    a cut-off file), and empty fields of the GPUs both list (matched by UUID, then PCI bus id). The XML has no
    compute capability on current drivers: a GPU known from the XML alone takes it from a GPU of the same
    name in the CSV, else keeps null (unknown). A CSV without a compute_cap column (a driver before R510
    refuses the field) gives the capability of the GPU models gpu_names knows by name, null for others.

    MIG: `mig` is true when MIG mode is on (CSV `mig.mode.current` or the XML's `mig_mode/current_mig`),
    `mig_devices` lists the instances (XML only), and `memory_mib` is then what one process can use: the
    largest instance's memory (0 with no instance, null when the instances are unknown), not the card's.
    `nvidia-smi -L` adds each instance's `uuid` and `profile` (and a GPU's `uuid` the others lack); it names
    no GPU the CSV and the XML do not have.
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
    _add_listing(gpus, files.get("nvidia-smi-L.txt"))
    for gpu in gpus:
        _mig_memory(gpu)
    return gpus, driver if gpus else {"driver_version": None, "cuda_version": None}


def cuda_visible(gpus: list[dict], text: str | None) -> tuple[list[dict], dict | None]:
    """The GPUs the capturing process's CUDA_VISIBLE_DEVICES left it (cuda-visible-devices.txt, written only
    when the variable was set: its value, then CUDA_DEVICE_ORDER=... when that was set), and what was read.
    A shared server hands each user some GPUs this way: a plan over all of them would take the others' (the
    rendered units set CUDA_VISIBLE_DEVICES themselves). Entries are nvidia-smi indices (the units run with
    CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's order) or GPU/MIG UUIDs, whole or as a unique prefix; a MIG
    UUID keeps its GPU with that instance alone. As in CUDA, the list ends at the first entry that names no
    GPU. None: the variable was not set, every GPU is the planner's."""
    if text is None:
        return gpus, None
    lines = text.splitlines() or [""]
    raw = lines[0].strip()
    order = next(
        (ln.split("=", 1)[1].strip() for ln in lines[1:] if ln.startswith("CUDA_DEVICE_ORDER=")), None
    )
    kept: list[dict] = []
    instances: dict[int, list[dict]] = {}
    for entry in (e.strip() for e in raw.split(",")) if raw else ():
        match = [g for g in gpus if _names_gpu(entry, g)]
        if len(match) != 1:
            break
        gpu = match[0]
        named = [d for d in gpu.get("mig_devices") or [] if entry and (d.get("uuid") or "").startswith(entry)]
        if gpu in kept and not named:
            break
        if gpu not in kept:
            kept.append(gpu)
        if named:
            instances.setdefault(id(gpu), []).extend(named)
    narrowed = []
    for gpu in kept:
        if id(gpu) in instances:  # only the instances named: the others are someone else's
            gpu = dict(gpu, mig_devices=instances[id(gpu)])
            _mig_memory(gpu)
        narrowed.append(gpu)
    info = {"value": raw, "hidden_indices": [g["index"] for g in gpus if g not in kept]}
    mixed = len({(g.get("name"), g.get("memory_mib")) for g in gpus}) > 1
    if mixed and order != "PCI_BUS_ID" and any(_CUDA_INDEX.fullmatch(e.strip()) for e in raw.split(",")):
        info["note"] = (
            "its numbers were read in nvidia-smi's (PCI bus) order, while the capturing process counted in "
            f"CUDA's {order or 'default (fastest first)'} order: on these mixed GPUs they may name others; "
            "give GPU UUIDs"
        )
    return narrowed, info


# an index entry of CUDA_VISIBLE_DEVICES: ASCII digits (str.isdigit() also takes "²", which int() refuses,
# and int() refuses over 4300 digits); any other entry is read as a UUID prefix, and one naming no GPU ends
# the list
_CUDA_INDEX = re.compile(r"[0-9]{1,9}")


def _names_gpu(entry: str, gpu: dict) -> bool:
    if _CUDA_INDEX.fullmatch(entry):
        return gpu.get("index") == int(entry)
    uuids = [gpu.get("uuid") or ""] + [d.get("uuid") or "" for d in gpu.get("mig_devices") or []]
    return bool(entry) and any(u.startswith(entry) for u in uuids if u)


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
    """GPUs of `primary`, empty fields filled from the same GPU in `extra`, then the GPUs only `extra` has.

    An index is taken once: a later GPU of either list with an index already merged is left out."""

    def keys(gpu: dict) -> set[tuple[str, str]]:
        return {(key, gpu[key].upper()) for key in ("uuid", "pci_bus_id") if gpu[key]}

    merged: list[dict] = []
    used: set[int] = set()
    for gpu in primary:
        if any(gpu["index"] == other["index"] for other in merged):
            continue  # a row repeated (a capture appended to twice): the first one stands
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
        if "compute_cap" not in row:  # not asked (a driver before R510): known models by their name
            row["compute_cap"] = capability_from_name(_text(row.get("name")))
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
                "profile": None,  # from `nvidia-smi -L`
                "uuid": None,
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
        "compute_capability": _compute_capability(text(raw["compute_capability"])),
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


def _compute_capability(value: str | None) -> str | None:
    """The cell when it has the form plan validates (COMPUTE_CAPABILITY_RE), else None: a damaged cell
    such as "-1 9.0" is unknown, not carried into facts that plan would refuse."""
    return value if value is not None and COMPUTE_CAPABILITY_RE.fullmatch(value) else None


def _text(value: str | None) -> str | None:
    value = (value or "").strip()
    return None if value in ("", "N/A", "[N/A]") or value.startswith("[") else value


def _xml_root(text: str | None) -> ET.Element | None:
    """The `nvidia-smi -q -x` document; lines nvidia-smi printed around it on stdout (a corrupt infoROM's
    warning, "Unable to determine the device handle for GPU..." of a GPU that fell off the bus) are cut."""
    if not text or not text.strip():
        return None
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    text = text[max(start, 0) :]
    end = text.rfind("</nvidia_smi_log>")
    if end >= 0:
        text = text[: end + len("</nvidia_smi_log>")]
    try:
        return ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", text))
    except ET.ParseError:
        return None


def from_csv(text: str) -> bool:
    """Whether a `--query-gpu` CSV holds a GPU (the output of an nvidia-smi that exited non-zero may)."""
    return any(_valid(gpu) for gpu in _from_csv(text))


def xml_gpus(text: str) -> bool:
    """Whether `nvidia-smi -q -x` output holds a GPU."""
    return any(_valid(gpu) for gpu in _from_xml(text))


def listing(text: str) -> bool:
    """Whether `nvidia-smi -L` output lists a GPU."""
    return bool(_listing(text))


def _listing(text: str | None) -> dict[int, dict]:
    """`nvidia-smi -L` by GPU index: {"uuid", "mig": {device index: (profile, MIG uuid)}}.

    Lines of another shape (warnings, a cut-off line) and UUIDs of another form are skipped, and so are the
    MIG lines under a GPU line that was; a GPU index or a MIG device listed twice is left out (which one
    is meant cannot be told)."""
    gpus: dict[int, dict] = {}
    twice: set[int] = set()
    current: dict | None = None
    for line in (text or "").replace("\0", "").splitlines():
        line = line.rstrip()
        gpu, mig = _LISTED_GPU.fullmatch(line), _LISTED_MIG.fullmatch(line)
        if gpu:
            index, uuid = int(gpu.group(1)), gpu.group(2)
            current = {"uuid": uuid, "mig": {}, "twice": set()} if GPU_UUID.fullmatch(uuid) else None
            if index in gpus or index in twice:
                twice.add(index)
                current = None
            elif current is not None:
                gpus[index] = current
            continue
        if mig is None:
            if not line.startswith((" ", "\t")):
                current = None  # a top-level line that is no GPU: what follows is not under the last one
            continue
        if current is None or not MIG_UUID.fullmatch(mig.group(3)):
            continue
        number = int(mig.group(2))
        if number in current["mig"] or number in current["twice"]:
            current["twice"].add(number)
            current["mig"].pop(number, None)
        else:
            current["mig"][number] = (mig.group(1), mig.group(3))
    for index in twice:
        gpus.pop(index, None)
    for entry in gpus.values():
        del entry["twice"]
    return gpus


def _add_listing(gpus: list[dict], text: str | None) -> None:
    """MIG device UUIDs and profiles (and GPU UUIDs the other files lack) from `nvidia-smi -L`, matched by
    GPU index and the MIG device index; nothing is taken where the UUIDs show another GPU or instance."""
    listed = _listing(text)
    for gpu in gpus:
        entry = listed.get(gpu["index"])
        if entry is None:
            continue
        if gpu["uuid"] and gpu["uuid"].upper() != entry["uuid"].upper():
            continue  # not the GPU the CSV and XML call by this index
        gpu["uuid"] = gpu["uuid"] or entry["uuid"]
        for device in gpu["mig_devices"] or []:
            profile, uuid = entry["mig"].get(device["index"], (None, None))
            if uuid and _same_instance(uuid, entry["uuid"], device):
                device.update(profile=profile, uuid=uuid)


def _same_instance(uuid: str, gpu_uuid: str, device: dict) -> bool:
    """An R450 MIG-GPU-<uuid>/<gi>/<ci> names its GPU and instance ids: they must be this device's."""
    old = MIG_UUID.fullmatch(uuid)
    if old is None or old.group(1) is None:
        return old is not None
    ids = (device["gpu_instance_id"], device["compute_instance_id"])
    return old.group(1).upper() == gpu_uuid.upper() and ids == (int(old.group(2)), int(old.group(3)))


def _add_topology(gpus: list[dict], text: str | None) -> None:
    """Fill links/affinities from `nvidia-smi topo -m` (tab-separated, header wrapped in ANSI codes).

    Columns are found by their header: the peers are the cells before "CPU Affinity", whatever they are
    named (GPUn and NICn, or mlx5_0 on older drivers), and the affinities sit under "CPU Affinity" and
    "NUMA Affinity" (absent on some drivers; "GPU NUMA ID" after them is not read). Only GPU peers become
    `links`; NIC rows are skipped."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in (text or "").splitlines()]
    if not lines or not gpus:
        return
    header = [cell.strip() for cell in lines[0].split("\t")]
    cpu_column = _column(header, "CPU Affinity")
    peers = header[1 : len(header) if cpu_column is None else cpu_column]
    # The affinity cells are padded with tabs by the width of what they hold, and drivers differ: 580 writes
    # "0-31\t0\t\tN/A", an older one "0-7\t\tN/A\t\tN/A" (a Tesla P4). Their columns are the header's
    # names after the peers, taken in order by the cells that are not empty (nvidia-smi writes N/A there).
    affinity_names = [name for name in header[len(peers) + 1 :] if name]
    by_index = {f"GPU{gpu['index']}": gpu for gpu in gpus}
    for line in lines[1:]:
        fields = [field.strip() for field in line.split("\t")]
        gpu = by_index.get(fields[0])
        if gpu is None or len(fields) < 1 + len(peers):
            continue
        gpu["links"] = {
            peer: link
            for peer, link in zip(peers, fields[1 : 1 + len(peers)], strict=True)
            if re.fullmatch(r"GPU\d+", peer) and link != "X"
        }
        cells = dict(zip(affinity_names, [cell for cell in fields[1 + len(peers) :] if cell], strict=False))
        affinity = _cell(cells.get("CPU Affinity"))
        if affinity is not None:
            gpu["cpu_affinity"] = affinity
        numa = _cell(cells.get("NUMA Affinity"))
        if numa is not None:
            gpu["numa_affinity"] = _int_or_none(numa)


def _column(header: list[str], name: str) -> int | None:
    return header.index(name) if name in header else None


def _cell(value: str | None) -> str | None:
    """An affinity cell; None where it is missing or N/A."""
    return None if value in (None, "", "N/A") else value


def _int_or_none(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None
