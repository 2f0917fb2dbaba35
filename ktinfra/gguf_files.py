"""GGUF files for kt-kernel's LLAMAFILE backend: their headers (never their tensors), the quant they hold,
and what a directory of them puts in RAM.

kt-kernel (kt-kernel/python/utils/llamafile.py and loader.py, GGUFLoader) reads every ``*.gguf`` file
directly in ``--kt-weight-path`` (not its subdirectories) and copies each MoE layer's
``blk.N.ffn_{gate,up,down}_exps.weight`` tensors into its own buffers; the rest of the file (attention,
embeddings, shared experts) is served by SGLang from the HF checkpoint and only stays mapped. So the RAM a
GGUF directory costs is the bytes of those expert tensors, read here from the tensor table of each header.

The header is parsed with the standard library (GGUF v2/v3, little-endian, as llama.cpp writes it); the
reader stops at the end of the tensor table, so even a 400 GB model costs a few MB of reads (the tokenizer
arrays), and it never needs the `gguf` package.
"""

from __future__ import annotations

import errno
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ktinfra.links import LinkLoop

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32  # general.alignment when absent (GGUF spec)
MAX_DIMS = 4  # GGML_MAX_DIMS

# ggml tensor types: id -> (name, weights per block, bytes per block), as ggml's block structs define them
# (ggml-common.h; gguf-py's GGML_QUANT_SIZES lists the same). kt-kernel 0.7.2's GGUFLoader knows the block
# sizes of all of these but TQ1_0 and TQ2_0 (kt_kernel/utils/loader.py GGML_QUANT_SIZES, lines 55-86, looked
# up at line 1063; MXFP4, id 39, at line 85), and its bundled ggml has mxfp4 kernels but no ternary types: a
# tensor in TQ1_0/TQ2_0 cannot be loaded by the LLAMAFILE backend.
QK_K = 256
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 2 + 16),
    3: ("Q4_1", 32, 2 + 2 + 16),
    6: ("Q5_0", 32, 2 + 4 + 16),
    7: ("Q5_1", 32, 2 + 2 + 4 + 16),
    8: ("Q8_0", 32, 2 + 32),
    9: ("Q8_1", 32, 4 + 4 + 32),
    10: ("Q2_K", QK_K, 2 + 2 + QK_K // 16 + QK_K // 4),
    11: ("Q3_K", QK_K, 2 + QK_K // 4 + QK_K // 8 + 12),
    12: ("Q4_K", QK_K, 2 + 2 + QK_K // 2 + 12),
    13: ("Q5_K", QK_K, 2 + 2 + QK_K // 2 + QK_K // 8 + 12),
    14: ("Q6_K", QK_K, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16),
    15: ("Q8_K", QK_K, 4 + QK_K + QK_K // 8),
    16: ("IQ2_XXS", QK_K, 2 + QK_K // 4),
    17: ("IQ2_XS", QK_K, 2 + QK_K // 4 + QK_K // 32),
    18: ("IQ3_XXS", QK_K, 2 + QK_K // 4 + QK_K // 8),
    19: ("IQ1_S", QK_K, 2 + QK_K // 8 + QK_K // 16),
    20: ("IQ4_NL", 32, 2 + 16),
    21: ("IQ3_S", QK_K, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4),
    22: ("IQ2_S", QK_K, 2 + QK_K // 4 + QK_K // 16),
    23: ("IQ4_XS", QK_K, 2 + 2 + QK_K // 2 + QK_K // 64),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", QK_K, 2 + 4 * 13),
    35: ("TQ2_0", QK_K, 2 + 64),
    39: ("MXFP4", 32, 1 + 16),
}
# kt-kernel 0.7.2's LLAMAFILE backend, expert tensor type by type, measured on the H200 host: one tiny MoE
# layer per type against gguf-py's dequantized weights (scripts/device/gguf_kquant_check.py,
# docs/results/2026-11-29-h200-gguf-types). F32, F16, BF16, Q8_0, Q5_0, Q4_0, MXFP4, Q2_K-Q6_K and IQ1_S
# match them (relative L2 0.002-0.017); the types below do not.
_ABORTS = (
    "kt-kernel loads them, then the server aborts at its first forward (std::runtime_error 'llamafile not "
    "supported')"
)
KT_LLAMAFILE_FAILS: dict[str, str] = {
    "TQ1_0": "kt-kernel's GGUF loader has no such type (KeyError)",
    "TQ2_0": "kt-kernel's GGUF loader has no such type (KeyError)",
    **{kind: _ABORTS for kind in ("Q4_1", "Q5_1", "IQ4_NL", "IQ3_S", "IQ3_XXS", "IQ2_S", "IQ2_XS", "IQ1_M")},
    "IQ2_XXS": "kt-kernel computes a wrong result from them (relative L2 error 0.93 against the weights)",
}
# served, less exactly than the others: relative L2 error against the weights (two random layers)
KT_LLAMAFILE_IMPRECISE: dict[str, float] = {"IQ4_XS": 0.06}


def llamafile_failure(types) -> str | None:
    """Why kt-kernel's LLAMAFILE backend cannot serve expert tensors of these ggml types, or None."""
    bad = sorted(set(types) & set(KT_LLAMAFILE_FAILS))
    if not bad:
        return None
    reasons = "; ".join(dict.fromkeys(KT_LLAMAFILE_FAILS[kind] for kind in bad))
    return f"expert tensors in {', '.join(bad)}, which kt-kernel 0.7.2's LLAMAFILE cannot serve: {reasons}"


def llamafile_imprecision(types) -> str | None:
    """A warning for expert tensors kt-kernel serves with a larger error than the other types, or None."""
    rough = sorted(set(types) & set(KT_LLAMAFILE_IMPRECISE))
    if not rough:
        return None
    errors = ", ".join(f"{kind} {KT_LLAMAFILE_IMPRECISE[kind]:g}" for kind in rough)
    return (
        f"kt-kernel 0.7.2's LLAMAFILE computes {', '.join(rough)} expert tensors less exactly than the other "
        f"GGUF types (relative L2 error against the weights: {errors}; Q4_K, Q8_0 0.01-0.02): a K-quant file "
        "(e.g. Q4_K_M) is the safer choice"
    )


TYPE_BITS = {name: size * 8 / block for name, block, size in GGML_TYPES.values()}

# llama.cpp's file types (llama.h llama_ftype; general.file_type): id -> the name quantize and file names use.
LLAMA_FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
    36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}  # fmt: skip

# What each file type makes of the routed experts, by llama.cpp's tensor-type rules (src/llama-quant.cpp,
# llama_ftype_get_default_type and llama_tensor_get_type): (gate and up projections, down projection), each
# {tensor type: share of the MoE layers}. The mixed types change ffn_down by layer: "half" is use_more_bits
# (the first and last eighth of the layers and every third one between: 1/8 + 1/8 + 3/4 x 1/3 = 1/2), "an
# eighth" / "a sixteenth" the first layers. Falcon's and 8-expert (Mixtral) models' special cases and the
# imatrix-only tweaks of Q4_0/Q5_0 are left out; IQ4_NL/IQ4_XS are taken without an imatrix (their first
# eighth of ffn_down in Q5_K), the larger variant. Files made with --tensor-type overrides (e.g. unsloth's
# "UD" quants) follow none of this: a directory of them is sized from its headers, not from this table.
HALF, EIGHTH, SIXTEENTH = 1 / 2, 1 / 8, 1 / 16


def _one(kind: str) -> dict[str, float]:
    return {kind: 1.0}


def _part(kind: str, share: float, rest: str) -> dict[str, float]:
    return {kind: share, rest: 1 - share}


EXPERT_MIX: dict[str, tuple[dict[str, float], dict[str, float]]] = {
    "F32": (_one("F32"), _one("F32")),  # kt-kernel 0.7.2 loaded it on the H100 (docs/results/2026-11-24-*)
    "BF16": (_one("BF16"), _one("BF16")),
    "F16": (_one("F16"), _one("F16")),
    "Q8_0": (_one("Q8_0"), _one("Q8_0")),
    "Q6_K": (_one("Q6_K"), _one("Q6_K")),
    "Q5_1": (_one("Q5_1"), _one("Q5_1")),
    "Q5_K_M": (_one("Q5_K"), _part("Q6_K", HALF, "Q5_K")),
    "Q5_K_S": (_one("Q5_K"), _one("Q5_K")),
    "Q5_0": (_one("Q5_0"), _one("Q5_0")),
    "Q4_1": (_one("Q4_1"), _one("Q4_1")),
    "Q4_K_M": (_one("Q4_K"), _part("Q6_K", HALF, "Q4_K")),
    "Q4_K_S": (_one("Q4_K"), _part("Q5_K", EIGHTH, "Q4_K")),
    "Q4_0": (_one("Q4_0"), _one("Q4_0")),
    "IQ4_NL": (_one("IQ4_NL"), _part("Q5_K", EIGHTH, "IQ4_NL")),
    "IQ4_XS": (_one("IQ4_XS"), _part("Q5_K", EIGHTH, "IQ4_XS")),
    "Q3_K_L": (_one("Q3_K"), _one("Q5_K")),
    "Q3_K_M": (_one("Q3_K"), _part("Q5_K", SIXTEENTH, "Q4_K")),
    "Q3_K_S": (_one("Q3_K"), _one("Q3_K")),
    "IQ3_M": (_one("IQ3_S"), _part("Q4_K", EIGHTH, "IQ3_S")),
    "IQ3_S": (_one("IQ3_S"), _one("IQ3_S")),
    "IQ3_XS": (_part("IQ3_XXS", 3 / 4, "IQ3_S"), _one("IQ3_S")),
    "IQ3_XXS": (_one("IQ3_XXS"), _one("IQ3_XXS")),  # needs an imatrix, which skips its ffn_down rule
    "Q2_K": (_one("Q2_K"), _one("Q3_K")),
    "Q2_K_S": (_one("Q2_K"), _part("Q4_K", EIGHTH, "Q2_K")),
    "IQ2_M": (_one("IQ2_S"), _part("IQ3_S", EIGHTH, "IQ2_S")),
    "IQ2_S": (_one("IQ2_XS"), _part("IQ3_S", EIGHTH, "IQ2_XS")),
    "IQ2_XS": (_one("IQ2_XS"), _part("Q2_K", EIGHTH, "IQ2_XS")),
    "IQ2_XXS": (_one("IQ2_XXS"), _part("Q2_K", EIGHTH, "IQ2_XXS")),
    "IQ1_M": (_one("IQ1_M"), _part("Q2_K", EIGHTH, "IQ1_M")),
    "IQ1_S": (_one("IQ1_S"), _part("Q2_K", EIGHTH, "IQ1_S")),
}


def expert_bits_per_weight(file_type: str) -> float:
    """Bits per routed-expert weight of a llama.cpp file type (gate, up and down are equally large). Exact
    for a single tensor type (Q8_0 8.5, Q6_K 6.5625); a mix is an average over the layers, given to two
    decimals: it depends on the layer count (llama.cpp counts ffn_down tensors, two a layer where shared
    experts sit beside the routed ones), so more digits would be invented."""
    gate_up, down = EXPERT_MIX[file_type]

    def bits(mix: dict[str, float]) -> float:
        return sum(TYPE_BITS[kind] * share for kind, share in mix.items())

    value = (2 * bits(gate_up) + bits(down)) / 3
    return value if len(gate_up) == len(down) == 1 else round(value, 2)


# ---- file names ------------------------------------------------------------------------------------------
# llama.cpp's split files (llama_split_path): NAME-00001-of-00003.gguf, numbered from 1
FILE_TYPE_NAMES = frozenset(LLAMA_FILE_TYPES.values())
SPLIT_NAME = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
_NAME_TOKENS = re.compile(r"[-.]")


def quant_in_name(file_name: str) -> str | None:
    """The llama.cpp file type a GGUF file name states (Qwen3-30B-A3B-Q8_0.gguf, ...-q4_k_m-00001-of-00002
    .gguf), the last one when several; None when it names none (e.g. unsloth's UD-Q4_K_XL, not a llama.cpp
    type)."""
    match = SPLIT_NAME.match(file_name)
    stem = match["stem"] if match else file_name.removesuffix(".gguf")
    found = [token.upper() for token in _NAME_TOKENS.split(stem) if token.upper() in FILE_TYPE_NAMES]
    return found[-1] if found else None


# ---- headers ---------------------------------------------------------------------------------------------
class GgufError(ValueError):
    """A file that is not a GGUF file this reader (and kt-kernel) can read, or a directory that cannot be
    served as it is."""


# GGUF metadata value types: id -> struct format (8: string and 9: array are read apart)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_UINT32 = 4


@dataclass(frozen=True)
class Tensor:
    name: str
    type_name: str
    elements: int
    offset: int  # from the start of the data section
    nbytes: int

    @property
    def layer(self) -> int | None:
        match = re.match(r"blk\.(\d+)\.", self.name)
        return int(match[1]) if match else None

    @property
    def routed_experts(self) -> bool:
        """One of the tensors kt-kernel's LLAMAFILE backend loads (blk.N.ffn_{gate,up,down}_exps.weight)."""
        return re.fullmatch(r"blk\.\d+\.ffn_(gate|up|down)_exps\.weight", self.name) is not None


@dataclass(frozen=True)
class Header:
    path: Path
    version: int
    metadata: dict  # scalar and string values (arrays are skipped)
    tensors: tuple[Tensor, ...]
    data_start: int
    file_bytes: int

    @property
    def file_type(self) -> str | None:
        """general.file_type as llama.cpp names it; None when absent (split files after the first carry no
        general.* keys) or unknown."""
        value = self.metadata.get("general.file_type")
        return LLAMA_FILE_TYPES.get(value) if isinstance(value, int) else None

    @property
    def data_end(self) -> int:
        return self.data_start + max((t.offset + t.nbytes for t in self.tensors), default=0)


class _Reader:
    def __init__(self, handle, path: Path, size: int):
        self.handle, self.path, self.size = handle, path, size

    def take(self, count: int) -> bytes:
        data = self.handle.read(count)
        if len(data) != count:
            raise GgufError(f"{self.path}: header ends early (truncated file?)")
        return data

    def skip(self, count: int) -> None:
        if self.handle.tell() + count > self.size:
            raise GgufError(f"{self.path}: header ends early (truncated file?)")
        self.handle.seek(count, 1)

    def unpack(self, fmt: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        length = self.unpack("Q")
        if self.handle.tell() + length > self.size:
            raise GgufError(f"{self.path}: a header string runs past the end of the file")
        return self.take(length).decode("utf-8", errors="replace")

    def count(self, value: int, at_least: int, what: str) -> int:
        """A count read from the file, refused when that many items could not fit in what is left of it."""
        if value * at_least > self.size - self.handle.tell():
            raise GgufError(f"{self.path}: {value} {what} cannot fit in the file (corrupt header?)")
        return value


def _value(reader: _Reader, kind: int):
    """One metadata value; arrays are skipped (None), strings and scalars returned."""
    if kind == _STRING:
        return reader.string()
    if kind == _ARRAY:
        item = reader.unpack("I")
        length = reader.unpack("Q")
        if item in _SCALARS:
            size = struct.calcsize(_SCALARS[item])
            reader.skip(reader.count(length, size, "array items") * size)
        elif item == _STRING:
            for _ in range(reader.count(length, 8, "array strings")):
                reader.skip(reader.unpack("Q"))
        elif item == _ARRAY:
            for _ in range(reader.count(length, 12, "nested arrays")):
                _value(reader, _ARRAY)
        else:
            raise GgufError(f"{reader.path}: unknown metadata array type {item}")
        return None
    if kind not in _SCALARS:
        raise GgufError(f"{reader.path}: unknown metadata value type {kind}")
    return reader.unpack(_SCALARS[kind])


def read_header(path: Path) -> Header:
    """The metadata and tensor table of one GGUF file; tensor data is never read."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        reader = _Reader(handle, path, size)
        if handle.read(4) != GGUF_MAGIC:
            raise GgufError(f"{path}: not a GGUF file (no GGUF magic)")
        version = reader.unpack("I")
        if version not in (2, 3):
            swapped = struct.unpack(">I", struct.pack("<I", version))[0]
            if swapped in (2, 3):
                raise GgufError(f"{path}: a big-endian GGUF file; kt-kernel reads little-endian ones")
            raise GgufError(f"{path}: GGUF version {version}; only versions 2 and 3 are read")
        tensor_count = reader.count(reader.unpack("Q"), 24, "tensors")  # name length, dims, type, offset
        kv_count = reader.count(reader.unpack("Q"), 12, "metadata keys")
        # gguf-py's GGUFReader, which kt-kernel's GGUFLoader opens every file with, refuses a key or a tensor
        # name given twice and a general.alignment that is not a uint32 power of two (as llama.cpp does)
        metadata, keys = {}, set()
        for _ in range(kv_count):
            key = reader.string()
            kind = reader.unpack("I")
            if key in keys:
                raise GgufError(f"{path}: metadata key {key} appears twice (corrupt header?)")
            keys.add(key)
            if key == "general.alignment" and kind != _UINT32:
                raise GgufError(f"{path}: general.alignment is metadata type {kind}, not uint32")
            value = _value(reader, kind)
            if value is not None:
                metadata[key] = value
        tensors = [_tensor(reader) for _ in range(tensor_count)]
        names: set[str] = set()
        for tensor in tensors:
            if tensor.name in names:
                raise GgufError(f"{path}: tensor {tensor.name} is listed twice (corrupt header?)")
            names.add(tensor.name)
        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if alignment <= 0 or alignment & (alignment - 1):
            raise GgufError(f"{path}: general.alignment {alignment} is not a power of two")
        data_start = -(-handle.tell() // alignment) * alignment
    return Header(path, version, metadata, tuple(tensors), data_start, size)


def _tensor(reader: _Reader) -> Tensor:
    name = reader.string()
    dims = reader.unpack("I")
    if not 1 <= dims <= MAX_DIMS:
        raise GgufError(f"{reader.path}: tensor {name} has {dims} dimensions")
    elements = 1
    for _ in range(dims):
        elements *= reader.unpack("Q")
    type_id = reader.unpack("I")
    offset = reader.unpack("Q")
    if type_id not in GGML_TYPES:
        raise GgufError(f"{reader.path}: tensor {name} has ggml type {type_id}, unknown here")
    type_name, block, size = GGML_TYPES[type_id]
    if elements % block:
        raise GgufError(f"{reader.path}: tensor {name}: {elements} weights are not whole {type_name} blocks")
    return Tensor(name, type_name, elements, offset, elements // block * size)


# ---- a directory -----------------------------------------------------------------------------------------
@dataclass
class GgufModel:
    """One model file, or one set of split files, in a weight directory."""

    name: str  # the file name, or the split set's first file name
    headers: list[Header] = field(default_factory=list)
    quant: str | None = None  # llama.cpp file type
    quant_source: str = ""  # "general.file_type" or "file name"

    @property
    def files(self) -> list[str]:
        return [h.path.name for h in self.headers]

    @property
    def file_bytes(self) -> int:
        return sum(h.file_bytes for h in self.headers)

    def expert_tensors(self, num_layers: int | None = None) -> list[Tensor]:
        """The routed-expert tensors kt-kernel loads: those of layers below `num_layers` (a multi-token-
        prediction layer stored after them is not loaded)."""
        return [
            t
            for h in self.headers
            for t in h.tensors
            if t.routed_experts and (num_layers is None or (t.layer or 0) < num_layers)
        ]


@dataclass
class GgufDir:
    path: Path
    models: list[GgufModel]  # those holding routed-expert tensors
    others: list[str]  # .gguf files without them (e.g. a vision projector, mmproj-*.gguf)
    file_bytes: int  # every .gguf file in the directory

    @property
    def quants(self) -> list[str | None]:
        return sorted({m.quant for m in self.models}, key=lambda q: (q is None, q or ""))


def gguf_files(path: Path) -> list[Path]:
    """The .gguf files directly in `path`, which kt-kernel reads (sorted, as it reads them); `path` itself
    when it is a .gguf file, which kt-kernel 0.7.2's GGUFLoader reads alone (utils/loader.py:838). An empty
    list where `path` cannot be listed (not there yet, not searchable), LinkLoop (an OSError) where it is a
    loop of links."""
    if path.name.endswith(".gguf") and path.is_file():
        return [path]
    try:
        return sorted(p for p in Path(path).iterdir() if p.name.endswith(".gguf") and p.is_file())
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # nothing can be read or downloaded there: not "not there yet"
            raise LinkLoop(Path(path)) from None
        return []


def _not_files(path: Path) -> list[str]:
    """Entries named *.gguf directly in the directory `path` that are no file: kt-kernel 0.7.2's GGUFLoader
    (utils/loader.py _load_directory) opens every name ending in .gguf that os.listdir gives, and a folder or
    a dangling link ends its load in an error."""
    if not path.is_dir():
        return []
    return sorted(p.name for p in path.iterdir() if p.name.endswith(".gguf") and not p.is_file())


def gguf_subdirs(path: Path) -> list[str]:
    """Subdirectories (not hidden ones such as huggingface_hub's .cache) holding .gguf files: a GGUF repo
    that keeps each quant in its own folder (unsloth's DeepSeek-V3-GGUF/Q4_K_M/...)."""
    try:
        subdirs = sorted(p for p in Path(path).iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    return [p.name for p in subdirs if gguf_files(p)]


def _split_models(headers: list[Header]) -> list[GgufModel]:
    """Group split files into their sets; check each set is whole and its part count agrees with each
    header's split.count (split.no, 0-based in llama.cpp's files, is not compared: kt-kernel reads every
    file whatever its number, and a part copied under another number repeats tensors, refused later)."""
    models: dict[str, GgufModel] = {}
    sets: dict[str, dict[int, Header]] = {}
    counts: dict[str, int] = {}
    for header in headers:
        match = SPLIT_NAME.match(header.path.name)
        if not match:
            models[header.path.name] = GgufModel(header.path.name, [header])
            continue
        stem, number, count = match["stem"], int(match["no"]), int(match["count"])
        if counts.setdefault(stem, count) != count:
            raise GgufError(
                f"{header.path.parent}: split files of {stem} disagree on how many parts there are"
            )
        if not 1 <= number <= count:  # kt-kernel would load it, the sizing would leave it out
            raise GgufError(f"{header.path}: part {number} of a set of {count} split parts")
        declared = header.metadata.get("split.count")
        if isinstance(declared, int) and declared != count:
            raise GgufError(f"{header.path}: its header says {declared} split parts, its name {count}")
        sets.setdefault(stem, {})[number] = header
    for stem, parts in sets.items():
        count = counts[stem]
        missing = [n for n in range(1, count + 1) if n not in parts]
        if missing:
            shown = ", ".join(f"{stem}-{n:05d}-of-{count:05d}.gguf" for n in missing[:3])
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise GgufError(
                f"{parts[min(parts)].path.parent}: split set {stem} lacks {shown}{more} "
                f"({len(parts)} of {count} parts present; an unfinished download?)"
            )
        ordered = [parts[n] for n in range(1, count + 1)]
        models[ordered[0].path.name] = GgufModel(ordered[0].path.name, ordered)
    return [models[name] for name in sorted(models)]


_EXPERT_PART = re.compile(r"blk\.(\d+)\.ffn_(gate|up|down|gate_up)_exps\.weight")


def check_expert_layers(headers: list[Header]) -> None:
    """kt-kernel's LLAMAFILE backend (kt_kernel/utils/llamafile.py, load_weights) takes each MoE layer's
    blk.N.ffn_gate_exps, ffn_up_exps and ffn_down_exps tensors by name, from whichever .gguf file of the
    directory holds them, and fails (KeyError, "Tensor ... not found in GGUF files") on one that is not
    there: a layer holding only some of them, or gate and up fused into one ffn_gate_up_exps tensor (as
    gguf-py writes them for checkpoints that store experts.gate_up_proj), cannot be served. GgufError names
    the first such layer."""
    parts: dict[int, dict[str, str]] = {}
    for header in headers:
        for tensor in header.tensors:
            if found := _EXPERT_PART.fullmatch(tensor.name):
                parts.setdefault(int(found[1]), {})[found[2]] = str(header.path)
    fused = sorted(layer for layer, held in parts.items() if "gate_up" in held)
    if fused:
        more = f" (and {len(fused) - 1} more layers)" if len(fused) > 1 else ""
        raise GgufError(
            f"{parts[fused[0]]['gate_up']}: blk.{fused[0]}.ffn_gate_up_exps.weight{more} holds gate and up "
            "fused in one tensor; kt-kernel's LLAMAFILE backend loads ffn_gate_exps and ffn_up_exps apart "
            "and fails on this file (KeyError): use a GGUF with separate gate and up expert tensors"
        )
    for layer, held in sorted(parts.items()):
        missing = [f"blk.{layer}.ffn_{p}_exps.weight" for p in ("gate", "up", "down") if p not in held]
        if missing:
            raise GgufError(
                f"{', '.join(sorted(set(held.values())))}: layer {layer} lacks {', '.join(missing)} beside "
                "its other expert tensors; kt-kernel's LLAMAFILE backend loads all three of every MoE layer "
                "and would fail on it (KeyError): a damaged or hand-edited file, or a split part missing?"
            )


def read_dir(path: Path) -> GgufDir | None:
    """The GGUF models directly in `path` (None when it holds no .gguf file), each with the quant it
    holds: the first file's general.file_type, else the quant its file name states."""
    files = gguf_files(path)
    if not files:
        return None
    if odd := _not_files(Path(path)):
        raise GgufError(
            f"{path}: {', '.join(odd)} {'is' if len(odd) == 1 else 'are'} not a file (a folder, or a link to "
            "nothing): kt-kernel's GGUF loader opens every *.gguf entry directly in --kt-weight-path and "
            "would fail on it; move or remove it"
        )
    headers = []
    for file in files:
        header = read_header(file)
        if header.data_end > header.file_bytes:
            raise GgufError(
                f"{file}: {header.file_bytes:,} bytes, but its tensors reach byte {header.data_end:,} "
                "(an unfinished download?)"
            )
        headers.append(header)
    models, others = [], []
    for model in _split_models(headers):
        if not any(_EXPERT_PART.fullmatch(t.name) for h in model.headers for t in h.tensors):
            others.extend(model.files)
            continue
        first = model.headers[0]
        if first.file_type:
            model.quant, model.quant_source = first.file_type, "general.file_type"
        elif quant_in_name(model.name):
            model.quant, model.quant_source = quant_in_name(model.name), "file name"
        models.append(model)
    return GgufDir(Path(path), models, others, sum(h.file_bytes for h in headers))


def mix_types(quant: str) -> set[str]:
    """The tensor types a llama.cpp file type puts in the routed experts (EXPERT_MIX)."""
    gate_up, down = EXPERT_MIX[quant]
    return set(gate_up) | set(down)
