"""Readers for lscpu (text, JSON, parsable) and /proc/cpuinfo output."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuRow:
    """One logical CPU as lscpu -p or /proc/cpuinfo describes it."""

    cpu: int
    core: int | None
    socket: int | None
    node: int | None


def lscpu_fields(lscpu_json: str | None, lscpu_txt: str | None) -> dict[str, str]:
    """`Field:` -> value from `lscpu -J` (preferred) or plain `lscpu`."""
    fields: dict[str, str] = {}
    if lscpu_json:
        try:
            _flatten_json(json.loads(lscpu_json).get("lscpu", []), fields)
        except (ValueError, AttributeError, RecursionError):
            fields = {}
    if not fields and lscpu_txt:
        for line in lscpu_txt.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip():
                fields.setdefault(name.strip(), value.strip())
    return fields


def _flatten_json(entries: list, fields: dict[str, str]) -> None:
    # util-linux >= 2.37 nests entries under "children"; older versions are flat.
    if not isinstance(entries, list):
        return
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("field", "")).strip().rstrip(":").strip()
        data = entry.get("data")
        if name and data is not None:
            fields.setdefault(name, str(data).strip())
        _flatten_json(entry.get("children"), fields)


def lscpu_int(fields: dict[str, str], name: str) -> int | None:
    try:
        return int(fields[name])
    except (KeyError, ValueError):
        return None


def lscpu_node_cpus(fields: dict[str, str]) -> dict[int, str]:
    """NUMA node -> cpu list from `NUMA nodeN CPU(s)` fields."""
    nodes: dict[int, str] = {}
    for name, value in fields.items():
        match = re.fullmatch(r"NUMA node(\d+) CPU\(s\)", name)
        if match and value:
            nodes[int(match.group(1))] = value
    return nodes


def parse_lscpu_p(text: str | None) -> list[CpuRow]:
    """Rows of `lscpu -p=CPU,Core,Socket,Node` (columns taken from its header comment).

    Offline CPUs (every field but the id empty) are left out. A file cut short must not add CPUs or cores:
    rows with fewer fields than the header declares are dropped, and so is a last row without its closing
    newline (lscpu ends every row with one; a cut inside the last field would otherwise pass for a whole row).
    """
    if not text:
        return []
    columns = ["CPU", "Core", "Socket", "Node"]
    lines = text.splitlines()
    if not text.endswith("\n") and lines and not lines[-1].lstrip().startswith("#"):
        lines.pop()
    rows: list[CpuRow] = []
    for line in lines:
        line = line.strip()
        if line.startswith("#"):
            header = [c.strip() for c in line.lstrip("#").split(",")]
            if header and header[0] == "CPU":
                columns = header
            continue
        if not line:
            continue
        fields = line.split(",")
        if len(fields) < len(columns):
            continue
        values = dict(zip(columns, fields, strict=False))
        cpu = _int_or_none(values.get("CPU"))
        if cpu is None or not any(value.strip() for value in fields[1:]):
            continue  # `lscpu -p -a` lists an offline CPU as "104,,,"
        rows.append(
            CpuRow(
                cpu,
                _int_or_none(values.get("Core")),
                _int_or_none(values.get("Socket")),
                _int_or_none(values.get("Node")),
            )
        )
    return rows


def parse_cpuinfo(text: str | None) -> tuple[list[dict[str, str]], list[CpuRow]]:
    """Processor blocks of /proc/cpuinfo and their topology rows (no NUMA node there)."""
    if not text:
        return [], []
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        name, sep, value = line.partition(":")
        if sep:
            current[name.strip()] = value.strip()
    if current:
        blocks.append(current)
    # a file cut short ends inside its last block: fewer fields than the first one, or no closing newline
    if len(blocks) > 1 and (len(blocks[-1]) < len(blocks[0]) or not text.endswith("\n")):
        blocks.pop()
    rows = []
    for block in blocks:
        cpu = _int_or_none(block.get("processor"))
        if cpu is not None:
            rows.append(
                CpuRow(cpu, _int_or_none(block.get("core id")), _int_or_none(block.get("physical id")), None)
            )
    return blocks, rows


def _int_or_none(value: str | None) -> int | None:
    try:
        number = int(value) if value not in (None, "") else None
    except ValueError:
        return None
    return number if number is None or number >= 0 else None
