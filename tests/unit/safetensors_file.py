"""A safetensors file of F32 zeros written byte by byte (the format is a JSON header and raw data): the LoRA
tests need real adapter files without torch or safetensors installed."""

from __future__ import annotations

import json
import struct
from pathlib import Path


def write_safetensors(path: Path, shapes: dict[str, list[int]]) -> None:
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 4
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
