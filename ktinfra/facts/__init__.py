"""Host facts (schema 1 of docs/CONTRACTS.md) from a capture folder or the live host, through one parser.

Importable without typer or rich: Ansible modules, image builds and tests use it directly.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from ktinfra.facts.capture import SOURCES, collect_live, read_capture, write_capture
from ktinfra.facts.parse import SCHEMA, parse_files

__all__ = ["SCHEMA", "SOURCES", "from_capture", "gather_live", "load", "parse_files", "write_capture"]


def from_capture(path: str | os.PathLike) -> dict:
    """Facts of the host a capture folder was taken on (any file may be missing)."""
    return parse_files(read_capture(path), str(Path(path)))


def gather_live() -> dict:
    """Facts of this host: the capture's commands and files, run here and parsed the same way. The machine
    and kernel come from uname(2) itself: `uname -a` is laid out differently by busybox and toybox, and a
    minimal image may have no uname command."""
    facts = parse_files(collect_live(), "live")
    facts["os"]["arch"] = platform.machine() or facts["os"]["arch"]
    facts["os"]["kernel"] = facts["os"]["kernel"] or platform.release() or None
    return facts


def load(path: str | os.PathLike) -> dict:
    """Facts from a capture folder or from a `ktinfra facts --json` file (for `--facts`/`--from` options)."""
    target = Path(path)
    if target.is_dir():
        return from_capture(target)
    try:
        facts = json.loads(target.read_bytes())  # UTF-8 (RFC 8259; jq writes it raw), not the locale's
    except FileNotFoundError as error:
        raise FileNotFoundError(f"facts file or capture folder not found: {target}") from error
    except ValueError as error:
        raise ValueError(f"{target} is not a facts JSON file: {error}") from error
    if not isinstance(facts, dict) or facts.get("schema") != SCHEMA:
        raise ValueError(f"{target} is not facts schema {SCHEMA} (`ktinfra facts --json` output)")
    return facts
