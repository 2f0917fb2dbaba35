"""Host facts (schema 1 of docs/CONTRACTS.md) from a capture folder or the live host, through one parser.

Importable without typer or rich: Ansible modules, image builds and tests use it directly.
"""

from __future__ import annotations

import os
from pathlib import Path

from ktinfra.facts.capture import SOURCES, collect_live, read_capture, write_capture
from ktinfra.facts.parse import SCHEMA, parse_files

__all__ = ["SCHEMA", "SOURCES", "from_capture", "gather_live", "parse_files", "write_capture"]


def from_capture(path: str | os.PathLike) -> dict:
    """Facts of the host a capture folder was taken on (any file may be missing)."""
    return parse_files(read_capture(path), str(Path(path)))


def gather_live() -> dict:
    """Facts of this host: the capture's commands and files, run here and parsed the same way."""
    return parse_files(collect_live(), "live")
