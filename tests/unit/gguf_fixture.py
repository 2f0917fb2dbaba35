"""Fake GGUF files for the planner's tests, written with struct by the GGUF v3 layout (ggml's docs/gguf.md):
magic, version, counts, metadata, tensor table, padding to the alignment; the tensor data is left as a hole
(the file is truncated to its full length), so a 30 GB Q8_0 model costs a few kB of disk. Written here
rather than with gguf-py's GGUFWriter because the test environment does not install the `gguf` package;
tests/unit/test_gguf_weights.py checks ktinfra's reader against GGUFWriter's files where it is installed.

Tensor dimensions are in ggml order (ne[0] first: the row length), as llama.cpp stores
blk.N.ffn_gate_exps.weight = [hidden, expert width, experts].
"""

from __future__ import annotations

import struct
from pathlib import Path

ALIGNMENT = 32
# ggml type ids and (weights per block, bytes per block) of the types these tests write
TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210),
    "TQ2_0": (35, 256, 66), "MXFP4": (39, 32, 17), "Q4_1": (3, 32, 20), "IQ2_XXS": (16, 256, 66),
    "IQ3_XXS": (18, 256, 98), "IQ1_S": (19, 256, 50),
}  # fmt: skip
FILE_TYPES = {"F32": 0, "F16": 1, "Q8_0": 7, "Q4_K_M": 15, "Q6_K": 18, "TQ1_0": 36}
# the tensor types each file type writes here: (gate and up, down); Q4_K_M as llama.cpp mixes it, by layer
LAYOUT = {"F32": ("F32", "F32"), "Q8_0": ("Q8_0", "Q8_0"), "Q6_K": ("Q6_K", "Q6_K"), "F16": ("F16", "F16")}


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _kv(key: str, value) -> bytes:
    if isinstance(value, str):
        return _string(key) + struct.pack("<I", 8) + _string(value)
    if isinstance(value, tuple):  # ("u16", n)
        return _string(key) + struct.pack("<IH", 2, value[1])
    if isinstance(value, list):  # strings
        items = b"".join(_string(item) for item in value)
        return _string(key) + struct.pack("<IIQ", 9, 8, len(value)) + items
    return _string(key) + struct.pack("<II", 4, value)


def nbytes(type_name: str, dims: tuple[int, ...]) -> int:
    _, block, size = TYPES[type_name]
    elements = 1
    for dim in dims:
        elements *= dim
    return elements // block * size


def write(path: Path, tensors: list[tuple[str, str, tuple[int, ...]]], metadata: dict) -> int:
    """A GGUF file holding `tensors` ((name, ggml type, dims)) and `metadata` (str, int as u32, ("u16", n),
    list of str); returns the bytes of its tensor data."""
    kvs = b"".join(_kv(key, value) for key, value in metadata.items())
    infos, offset = b"", 0
    for name, kind, dims in tensors:
        infos += _string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        infos += struct.pack("<IQ", TYPES[kind][0], offset)
        offset += -(-nbytes(kind, dims) // ALIGNMENT) * ALIGNMENT
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)) + kvs + infos
    header += b"\0" * (-len(header) % ALIGNMENT)
    with open(path, "wb") as handle:
        handle.write(header)
        handle.truncate(len(header) + offset)  # a hole: no data blocks written
    return sum(nbytes(kind, dims) for _, kind, dims in tensors)


def moe_tensors(quant: str, layers: range, hidden: int, width: int, experts: int) -> list[tuple]:
    """The routed-expert tensors of `layers` in `quant` (Q4_K_M: down in Q6_K on every other layer)."""
    tensors = []
    for layer in layers:
        gate_up, down = LAYOUT.get(quant) or ("Q4_K", "Q6_K" if layer % 2 else "Q4_K")
        for part, kind, dims in (
            ("gate", gate_up, (hidden, width, experts)),
            ("up", gate_up, (hidden, width, experts)),
            ("down", down, (width, hidden, experts)),
        ):
            tensors.append((f"blk.{layer}.ffn_{part}_exps.weight", kind, dims))
    return tensors


# Qwen3-30B-A3B (the catalog's): 48 MoE layers of 128 experts, hidden 2048, expert width 768, vocabulary
# 151936
QWEN3_30B = {"layers": 48, "hidden": 2048, "width": 768, "experts": 128, "vocab": 151936}


def qwen3_30b(
    directory: Path,
    quant: str,
    *,
    name: str | None = None,
    parts: int = 1,
    file_type: bool = True,
    layers: int | None = None,
) -> int:
    """Qwen3-30B-A3B as llama.cpp lays it out in `quant` (its attention left out; embedding and output in
    Q8_0 so the files are larger than their experts), in `parts` split files; returns the expert bytes."""
    m = QWEN3_30B
    directory.mkdir(parents=True, exist_ok=True)
    name = name or f"Qwen3-30B-A3B-{quant}"
    count = layers if layers is not None else m["layers"]
    experts = moe_tensors(quant, range(count), m["hidden"], m["width"], m["experts"])
    whole = [
        ("token_embd.weight", "Q8_0", (m["hidden"], m["vocab"])),
        *experts,
        ("output.weight", "Q8_0", (m["hidden"], m["vocab"])),
    ]
    meta = {"general.architecture": "qwen3moe", "general.name": "Qwen3-30B-A3B"}
    if file_type:
        meta["general.file_type"] = FILE_TYPES[quant]
    meta["tokenizer.ggml.tokens"] = ["<a>", "<b>", "hello"]
    expert_bytes = sum(nbytes(kind, dims) for _, kind, dims in experts)
    if parts == 1:
        write(directory / f"{name}.gguf", whole, meta)
        return expert_bytes
    share = -(-len(whole) // parts)
    for index in range(parts):
        split = {"split.no": ("u16", index), "split.count": ("u16", parts)}
        part_meta = {**meta, **split} if index == 0 else split  # llama.cpp: general.* in the first only
        file = directory / f"{name}-{index + 1:05d}-of-{parts:05d}.gguf"
        write(file, whole[index * share : (index + 1) * share], part_meta)
    return expert_bytes
