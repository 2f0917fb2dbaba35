"""Headers gguf-py's GGUFReader refuses are refused by ktinfra's reader too.

kt-kernel's GGUFLoader opens every .gguf file of --kt-weight-path with gguf-py's GGUFReader, which raises on a
metadata key given twice, a tensor name given twice and a general.alignment that is not a uint32 power of two
(llama.cpp refuses the same). ktinfra's reader took them: the plan sized such a directory (a tensor listed
twice counted twice) and the server failed at load. Each case below is checked against GGUFReader itself.
"""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import gguf_fixture as fixture
import pytest

from ktinfra import gguf_files

Q8 = fixture.TYPES["Q8_0"][0]
EXPERT = (256, 32, 4)  # ggml order: row length, rows, experts


def kv_u32(key: str, value: int) -> bytes:
    return fixture._string(key) + struct.pack("<II", 4, value)


def kv_u64(key: str, value: int) -> bytes:
    return fixture._string(key) + struct.pack("<IQ", 10, value)


def write(path: Path, kvs: list[bytes], names: list[str], alignment: int = 32) -> None:
    """A GGUF v3 file with these raw metadata entries and Q8_0 tensors of these names, data written out."""
    infos, offset = b"", 0
    size = fixture.nbytes("Q8_0", EXPERT)
    for name in names:
        infos += fixture._string(name) + struct.pack("<I3Q", 3, *EXPERT) + struct.pack("<IQ", Q8, offset)
        offset += -(-size // alignment) * alignment
    header = b"GGUF" + struct.pack("<IQQ", 3, len(names), len(kvs)) + b"".join(kvs) + infos
    header += b"\0" * (-len(header) % alignment)
    path.write_bytes(header + b"\0" * offset)


TENSORS = ["blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.0.ffn_down_exps.weight"]
CASES = {
    "key twice": ([kv_u32("general.file_type", 7), kv_u32("general.file_type", 7)], TENSORS, 32),
    "tensor twice": ([kv_u32("general.file_type", 7)], [*TENSORS, TENSORS[0]], 32),
    "alignment not a power of two": ([kv_u32("general.alignment", 48)], TENSORS, 48),
    "alignment as uint64": ([kv_u64("general.alignment", 64)], TENSORS, 64),
}
MESSAGES = {
    "key twice": "metadata key general.file_type appears twice",
    "tensor twice": "tensor blk.0.ffn_gate_exps.weight is listed twice",
    "alignment not a power of two": "general.alignment 48 is not a power of two",
    "alignment as uint64": "general.alignment is metadata type 10, not uint32",
}


@pytest.mark.parametrize("case", CASES)
def test_a_header_gguf_py_refuses_is_refused(tmp_path, case):
    kvs, names, alignment = CASES[case]
    path = tmp_path / "Model-Q8_0.gguf"
    write(path, kvs, names, alignment)
    with pytest.raises((KeyError, ValueError)):  # what kt-kernel's GGUFLoader would meet
        gguf.GGUFReader(str(path))
    with pytest.raises(gguf_files.GgufError, match=MESSAGES[case]):
        gguf_files.read_header(path)


@pytest.mark.parametrize("alignment", [32, 64])
def test_the_same_file_written_properly_is_read_by_both(tmp_path, alignment):
    path = tmp_path / "Model-Q8_0.gguf"
    write(path, [kv_u32("general.file_type", 7), kv_u32("general.alignment", alignment)], TENSORS, alignment)
    theirs = gguf.GGUFReader(str(path))
    mine = gguf_files.read_header(path)
    assert mine.data_start == theirs.data_offset and mine.data_end == mine.file_bytes
    assert [t.name for t in mine.tensors] == [t.name for t in theirs.tensors] == TENSORS
    assert gguf_files.read_dir(tmp_path).models[0].quant == "Q8_0"
