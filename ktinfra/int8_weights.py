"""The manifest kt-kernel requires beside INT8 expert weights it trains from (kt-weight-manifest.json).

kt-kernel 0.7.2 fine-tunes from INT8 experts (kt_expert_weight_format: int8), and sglang-kt 0.7.2 serves a
LoRA on AMXINT8 experts, only from convert_cpu_weights.py's layer-folder output (--no-merge-safetensor):
_layer_N/_numa_M/INT8_{gate,up,down}_E_SIZEByte_{quant,scale}_.kt. Its SFT loader then wants a schema-2
kt-weight-manifest.json beside the folders, listing every file with its size and sha256, and nothing else in
that directory (kt_kernel/sft/weight_manifest.py); merged safetensors are refused ("INT8_SFT requires
pre-quantized .kt files", sft/amx.py). No upstream tool writes that manifest for a kept (persistent) tree:
this checks a converted tree against the model's sizes and writes it. Plain serving reads the same tree.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ktinfra.digest import sha256_of

MANIFEST_NAME = "kt-weight-manifest.json"
LEGACY_MANIFEST_NAME = "kt-ephemeral-manifest.json"  # kt-kernel's schema-1 name
SCHEMA_VERSION = 2
LAYOUT = "kt-int8-n32-k64-vnni-v1"  # kt_kernel/sft/backend.py INT8_WEIGHT_LAYOUT (kt-kernel 0.7.2)
PROJECTIONS = ("gate", "up", "down")
KINDS = ("quant", "scale")
_FILE = re.compile(r"INT8_(gate|up|down)_(0|[1-9]\d*)_(\d+)Byte_(quant|scale)_\.kt")
# the names kt-kernel reads (f"_layer_{index}"): it would look for _layer_01 as _layer_1, which is not there
_LAYER = re.compile(r"_layer_(0|[1-9]\d*)")
_NUMA = re.compile(r"_numa_(0|[1-9]\d*)")


class WeightsError(Exception):
    """An INT8 tree or model config that cannot make a manifest kt-kernel accepts."""


@dataclass(frozen=True)
class ExpertShape:
    expert_num: int
    hidden_size: int
    intermediate_size: int  # the MoE (per expert) intermediate size
    moe_layers: tuple[int, ...]


def _positive(config: dict, *keys: str) -> int:
    for key in keys:
        value = config.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise WeightsError(f"config.json {key} must be a positive integer, got {value!r}")
            return value
    raise WeightsError(f"config.json has no {' or '.join(keys)}: not a MoE model kt-kernel converts")


def _is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _whole(config: dict, key: str, default: int) -> int:
    """An optional whole number (null: the default) that decides which layers have experts."""
    value = config.get(key)
    if value is None:
        return default
    if not _is_whole(value):
        raise WeightsError(f"config.json {key} must be a whole number, got {value!r}")
    return value


def expert_shape(model_path: Path) -> ExpertShape:
    """The routed experts' sizes and the MoE layers of the model in `model_path`, from its config.json."""
    try:
        config = json.loads((model_path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise WeightsError(f"cannot read {model_path / 'config.json'}: {exc}") from None
    if not isinstance(config, dict):
        raise WeightsError(f"{model_path / 'config.json'} is not a JSON object")
    text = config.get("text_config")
    if text is not None and not isinstance(text, dict):
        raise WeightsError(f"config.json text_config must be a JSON object, got {text!r}")
    config = text or config
    layers = _positive(config, "num_hidden_layers")
    first_dense = _whole(config, "first_k_dense_replace", 0)
    step = _whole(config, "decoder_sparse_step", 1) or 1  # Qwen MoE: layer i is MoE when (i + 1) % step == 0
    freq = _whole(config, "moe_layer_freq", 1) or 1  # DeepSeek: when i % freq == 0
    dense = config.get("mlp_only_layers") or []
    if not isinstance(dense, list) or not all(_is_whole(i) for i in dense):
        raise WeightsError(f"config.json mlp_only_layers must be a list of layer numbers, got {dense!r}")
    dense = set(dense)
    moe = tuple(
        i
        for i in range(layers)
        if i >= first_dense and i not in dense and (i + 1) % step == 0 and i % freq == 0
    )
    return ExpertShape(
        expert_num=_positive(config, "n_routed_experts", "num_experts", "num_local_experts"),
        hidden_size=_positive(config, "hidden_size"),
        intermediate_size=_positive(config, "moe_intermediate_size"),
        moe_layers=moe,
    )


def _file_size(shape: ExpertShape, numa_count: int, projection: str, kind: str) -> int:
    """Bytes of one .kt file: int8 weights of each NUMA part's share of the intermediate size, fp32 scales
    per output row (kt_kernel/sft/weight_manifest.py's size contract)."""
    part = shape.intermediate_size // numa_count
    if kind == "quant":
        return shape.hidden_size * part
    return (shape.hidden_size if projection == "down" else part) * 4


def _real_dir(path: Path) -> bool:
    """A directory that is not a symlink: kt-kernel refuses symlinks anywhere in the tree."""
    return path.is_dir() and not path.is_symlink()


def _numa_count(root: Path, layer: int) -> int:
    entries = sorted((root / f"_layer_{layer}").iterdir())
    names = [p.name for p in entries]
    parts = [int(m.group(1)) for p in entries if (m := _NUMA.fullmatch(p.name)) and _real_dir(p)]
    if len(parts) != len(names) or sorted(parts) != list(range(len(parts))) or not parts:
        raise WeightsError(
            f"{root}/_layer_{layer} must hold only the folders _numa_0 .. _numa_N-1 (no files, no symlinks), "
            f"has {names}"
        )
    return len(parts)


def _scan_layer(root: Path, layer: int, shape: ExpertShape, numa_count: int, hashes: bool) -> dict:
    files, seen = [], set()
    for numa in range(numa_count):
        folder = root / f"_layer_{layer}" / f"_numa_{numa}"
        for path in sorted(folder.iterdir()):
            rel = path.relative_to(root).as_posix()
            found = _FILE.fullmatch(path.name)
            if path.is_symlink() or not path.is_file() or not found:
                raise WeightsError(f"{rel} is not an INT8 .kt weight file of convert_cpu_weights.py")
            projection, expert, encoded, kind = found.groups()
            expected = _file_size(shape, numa_count, projection, kind)
            size = path.stat().st_size
            if int(expert) < shape.expert_num and size == int(encoded) != expected:
                _check_other_pool_count(root, rel, shape, numa_count, projection, kind, size)
            if int(expert) >= shape.expert_num or int(encoded) != expected or size != expected:
                raise WeightsError(
                    f"{rel}: {size} bytes for expert {expert}, the model's sizes give {expected} bytes and "
                    f"experts 0..{shape.expert_num - 1}: converted from another model or cut off?"
                )
            if not os.access(path, os.R_OK):  # kt-kernel: PermissionError "INT8 weight file is not readable"
                raise WeightsError(
                    f"{rel} cannot be read by this user (uid {os.geteuid()}), and kt-kernel reads every file "
                    "of the tree: give the user that trains or serves read access to it"
                )
            seen.add((numa, projection, int(expert), kind))
            entry = {"path": rel, "size_bytes": size}
            files.append(entry | ({"sha256": sha256_of(path)} if hashes else {}))
    missing = numa_count * len(PROJECTIONS) * shape.expert_num * len(KINDS) - len(seen)
    if missing:
        raise WeightsError(
            f"{root}/_layer_{layer} lacks {missing} of its .kt files: the conversion did not finish"
        )
    return {
        "index": layer,
        "state": "ready",
        "numa_count": numa_count,
        "files": files,
        "bytes": sum(f["size_bytes"] for f in files),
    }


def _check_other_pool_count(
    root: Path, rel: str, shape: ExpertShape, numa_count: int, projection: str, kind: str, size: int
) -> None:
    """A whole file of this model split over another pool count: convert_cpu_weights.py writes into
    --output as it goes, so converting again with another --threadpool-count leaves the earlier files (and
    _numa_M folders) beside the new ones."""
    others = [
        n
        for n in range(1, shape.intermediate_size + 1)
        if n != numa_count and not shape.intermediate_size % n
    ]
    split = next((n for n in others if _file_size(shape, n, projection, kind) == size), None)
    if split is not None:
        raise WeightsError(
            f"{rel} is split over {split} NUMA pools, the tree's _numa_ folders over {numa_count}: two "
            f"conversions with different --threadpool-count wrote into {root}; remove it and convert again"
        )


def build_manifest(root: Path, model_path: Path, *, hashes: bool = True) -> dict:
    """The schema-2 manifest of the converted tree `root` of the model in `model_path`; WeightsError names
    what kt-kernel would refuse (a merged or foreign file, a missing layer or file, a size off)."""
    shape = expert_shape(model_path)
    if not root.is_dir():
        raise WeightsError(f"{root} is not a directory")
    if root.is_symlink():
        raise WeightsError(
            f"{root} is a symlink, which kt-kernel refuses as an INT8 weight root: give the directory it "
            f"points to ({root.resolve()})"
        )
    entries = sorted(p.name for p in root.iterdir() if p.name != MANIFEST_NAME)
    if LEGACY_MANIFEST_NAME in entries:
        _refuse_legacy_manifest(root)
    stray = [n for n in entries if not _LAYER.fullmatch(n) or not _real_dir(root / n)]
    if stray:
        _refuse_wrong_level(root, entries)
        raise WeightsError(
            f"{root} holds {', '.join(stray[:3])}{' ...' if len(stray) > 3 else ''}: kt-kernel takes INT8 "
            "experts for training only as convert_cpu_weights.py --no-merge-safetensor output (_layer_N "
            "folders, no symlinks, and nothing else): remove the directory and convert again"
        )
    layers = sorted(int(_LAYER.fullmatch(n).group(1)) for n in entries)
    if not shape.moe_layers:
        raise WeightsError(f"{model_path / 'config.json'} has no MoE layer: nothing kt-kernel converts")
    if tuple(layers) != shape.moe_layers:
        raise WeightsError(
            f"{root} has expert layers {_ranges(layers)}, the model's config.json has "
            f"{_ranges(shape.moe_layers)}: the conversion did not finish, or was made from another model"
        )
    numa_count = _numa_count(root, layers[0])
    if shape.intermediate_size % numa_count:
        raise WeightsError(
            f"moe_intermediate_size {shape.intermediate_size} does not split over {numa_count} pools"
        )
    scanned = []
    for layer in layers:
        if _numa_count(root, layer) != numa_count:
            raise WeightsError(
                f"{root}/_layer_{layer} is split over another number of NUMA pools than layer {layers[0]}"
            )
        scanned.append(_scan_layer(root, layer, shape, numa_count, hashes))
    return {
        "schema_version": SCHEMA_VERSION,
        "state": "ready",
        "expert_weight_format": "int8",
        "backend": "INT8",
        "layout": LAYOUT,
        "threadpool_count": numa_count,
        "expert_num": shape.expert_num,
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "layers": scanned,
        "bytes": sum(layer["bytes"] for layer in scanned),
    }


def _refuse_legacy_manifest(root: Path) -> None:
    """kt-kernel loads a tree with exactly one manifest, its schema-1 one too: the files stay, the old
    manifest goes before a schema-2 one is written."""
    legacy = root / LEGACY_MANIFEST_NAME
    raise WeightsError(
        f"{root} holds kt-kernel's schema-1 {LEGACY_MANIFEST_NAME} (kt-kernel loads a tree with exactly one "
        f"manifest): for a schema-2 {MANIFEST_NAME}, remove {legacy} and run `ktinfra weights manifest` "
        "again; the converted files stay"
    )


def _holds_layers(folder: Path) -> bool:
    try:
        return _real_dir(folder) and any(_LAYER.fullmatch(p.name) and _real_dir(p) for p in folder.iterdir())
    except OSError:
        return False


def _refuse_wrong_level(root: Path, entries: list[str]) -> None:
    """A DIR off the tree (its parent folder, one of its _layer_N folders or _layer_N/_numa_M folders): say
    which folder to give, not "remove the directory", which would delete the conversion (or everything beside
    it, or part of it)."""
    inside = [n for n in entries if _holds_layers(root / n)]
    if inside:
        raise WeightsError(
            f"{root} is not a converted tree but holds {len(inside)} ({', '.join(inside[:3])}"
            f"{' ...' if len(inside) > 3 else ''}): give the tree itself, {root / inside[0]}"
        )
    if _LAYER.fullmatch(root.name) and entries and all(_NUMA.fullmatch(n) for n in entries):
        raise WeightsError(
            f"{root} is one layer's folder of a converted tree: give the tree itself, {root.parent}"
        )
    tree = root.parent.parent
    if (
        _NUMA.fullmatch(root.name)
        and _LAYER.fullmatch(root.parent.name)
        and any(map(_FILE.fullmatch, entries))
    ):
        raise WeightsError(
            f"{root} is one NUMA pool's folder of a converted tree: give the tree itself, {tree}"
        )


def _ranges(layers) -> str:
    layers = list(layers)
    if not layers:
        return "none"
    if layers == list(range(layers[0], layers[-1] + 1)):
        return f"{layers[0]}-{layers[-1]}" if len(layers) > 1 else str(layers[0])
    return ",".join(map(str, layers[:8])) + (" ..." if len(layers) > 8 else "")


def write_manifest(root: Path, model_path: Path) -> dict:
    """Check the tree, then write its manifest atomically (a cut-off run leaves none, which the convert unit
    and kt-kernel both take as "not converted"). Returns a summary."""
    manifest = build_manifest(root, model_path)
    target = root / MANIFEST_NAME
    tmp = (
        root.parent / f".{root.name}.{MANIFEST_NAME}.{os.getpid()}.tmp"
    )  # outside root: kt-kernel wants it bare
    try:
        with tmp.open("w") as handle:
            json.dump(manifest, handle, sort_keys=True, separators=(",", ":"))
            handle.flush()
            os.fsync(handle.fileno())
        tmp.chmod(0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return summary(manifest, target)


def summary(manifest: dict, path: Path) -> dict:
    return {
        "manifest": str(path),
        "layers": len(manifest["layers"]),
        "threadpool_count": manifest["threadpool_count"],
        "files": sum(len(layer["files"]) for layer in manifest["layers"]),
        "bytes": manifest["bytes"],
    }


def read_manifest(root: Path) -> dict | None:
    """The manifest in `root` (None when there is none); WeightsError when it is unreadable."""
    try:
        return _read_manifest(root)
    except OSError as exc:  # a tree this user may not search (e.g. 0700, another user's)
        raise WeightsError(f"cannot read {root / MANIFEST_NAME}: {exc.strerror or exc}") from None


def _read_manifest(root: Path) -> dict | None:
    path = root / MANIFEST_NAME
    if not path.exists() and not path.is_symlink():
        return None
    # kt-kernel's sft/weight_manifest.py loads a tree only with exactly one manifest, a regular file
    if path.is_symlink() or not path.is_file():
        raise WeightsError(
            f"{path} is {'a symlink' if path.is_symlink() else 'not a file'}: kt-kernel reads the manifest "
            "only as a regular file in the tree (`ktinfra weights manifest` writes one there)"
        )
    legacy = root / LEGACY_MANIFEST_NAME
    if legacy.exists() or legacy.is_symlink():
        raise WeightsError(
            f"{root} holds both {MANIFEST_NAME} and kt-kernel's older {LEGACY_MANIFEST_NAME}: kt-kernel "
            f"loads a tree only with exactly one; remove {legacy}"
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise WeightsError(f"cannot read {path}: {exc}") from None
    # kt-kernel takes only the integer 2 (2.0 is "unsupported INT8 manifest schema_version 2.0")
    version = manifest.get("schema_version") if isinstance(manifest, dict) else None
    if type(version) is not int or version != SCHEMA_VERSION:
        raise WeightsError(f"{path} is not a schema-{SCHEMA_VERSION} INT8 weight manifest")
    return manifest


def check_manifest(root: Path, model_path: Path, hashes: bool = False) -> dict:
    """The tree as it is now against its manifest: every setting and count kt-kernel validates (layers,
    pools, file set, sizes, byte totals, layout), and a sha256 of the form it requires for every file. The
    hashes' values only with `hashes` (the whole tree is read): kt-kernel 0.7.2 compares them when it loads a
    pretrained KT artifact (sft/artifacts.py), not when it trains from kt_weight_path (sft/wrapper.py)."""
    if not root.is_dir():
        raise WeightsError(f"{root} is not a directory" if root.exists() else f"{root} does not exist")
    recorded = read_manifest(root)
    if recorded is None:
        if (root / LEGACY_MANIFEST_NAME).exists() or (root / LEGACY_MANIFEST_NAME).is_symlink():
            _refuse_legacy_manifest(root)
        _refuse_wrong_level(root, sorted(p.name for p in root.iterdir()))
        raise WeightsError(f"{root} has no {MANIFEST_NAME}: write it with `ktinfra weights manifest`")
    current = build_manifest(root, model_path, hashes=False)
    wrong = _difference(recorded, current)
    if wrong:
        raise WeightsError(
            f"{root / MANIFEST_NAME} does not describe the files there now ({wrong}): write it again"
        )
    if hashes:
        _check_hashes(root, recorded)
    return summary(current, root / MANIFEST_NAME)


def _check_hashes(root: Path, recorded: dict) -> None:
    """Every file's sha256 against the one recorded (the manifest already matches the tree otherwise)."""
    for layer in sorted(recorded["layers"], key=_by_index):
        for entry in _by_path(layer["files"]):
            if sha256_of(root / entry["path"]) != entry["sha256"]:
                raise WeightsError(
                    f"{entry['path']}: its sha256 is not the one {MANIFEST_NAME} records, at the same size: "
                    "the file was replaced after the manifest was written (another conversion into the "
                    "tree?), and kt-kernel refuses it where it checks hashes: convert again into an empty "
                    "directory, then write the manifest"
                )


_LAYER_KEYS = ("index", "state", "numa_count", "bytes")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _by_index(layer: dict) -> tuple:
    """Recorded layers in build_manifest's order (in any order, they are the same manifest to kt-kernel)."""
    index = layer["index"]
    return (0, index, "") if type(index) is int else (1, 0, str(index))


def _shown(indices: list) -> str:
    return _ranges(indices) if all(type(i) is int for i in indices) else repr(indices)


def _int(value):
    """A size as kt-kernel takes it: an int, not 2048.0 or true (its _positive_int refuses those)."""
    return value if type(value) is int else repr(value)


def _by_path(files: list[dict]) -> list[dict]:
    return sorted(files, key=lambda f: str(f["path"]))


def _difference(recorded: dict, current: dict) -> str | None:
    """What of `recorded` (a manifest read back) kt-kernel would find off against `current` (the tree as it is
    now, without hashes); None when nothing is."""
    backend = recorded.get("backend", "INT8")
    if not isinstance(backend, str) or backend.strip().lower() not in ("int8", "auto"):
        return f"backend {backend!r}"
    for key, value in current.items():
        # kt-kernel compares these with !=, but takes `bytes` only as an int (53248.0 is refused)
        if key not in ("backend", "layers") and (
            recorded.get(key) != value or (key == "bytes" and type(recorded[key]) is not int)
        ):
            return f"{key} {recorded.get(key)!r}, the tree gives {value!r}"
    try:
        layers = [
            {k: layer.get(k) for k in _LAYER_KEYS}
            | {"files": [{"path": f["path"], "size_bytes": _int(f["size_bytes"])} for f in layer["files"]]}
            for layer in recorded["layers"]
        ]
        hashes = [f.get("sha256") for layer in recorded["layers"] for f in layer["files"]]
    except (KeyError, TypeError, AttributeError):
        return "its layers are not lists of files"
    indices = [layer["index"] for layer in sorted(layers, key=_by_index)]
    if indices != [layer["index"] for layer in current["layers"]] or not all(type(i) is int for i in indices):
        return (
            f"layers {_shown(indices)}, the tree has {_ranges(layer['index'] for layer in current['layers'])}"
        )
    for was, now in zip(sorted(layers, key=_by_index), current["layers"], strict=True):
        for k in _LAYER_KEYS[1:]:
            if was[k] != now[k] or type(was[k]) is not type(now[k]):  # kt-kernel refuses true for 1
                return f"layer {now['index']}: {k} {was[k]!r}, the tree gives {now[k]!r}"
        if _by_path(was["files"]) != _by_path(now["files"]):
            return f"layer {now['index']}: other files or sizes"
    bad = next((h for h in hashes if not isinstance(h, str) or not _SHA256.fullmatch(h)), False)
    if bad is not False:
        return f"a file's sha256 is {bad!r}, not 64 lowercase hex digits"
    return None
