"""LoRA serving pipeline: training output -> SGLang adapter -> LoRA serve plan (ktinfra.render) -> chat check.

Current stack: a KT SFT output (PEFT's adapter_config.json + adapter_model.safetensors, kt-kernel's
fused_expert_lora.safetensors and kt_adapter_manifest.json) is merged into one PEFT-style adapter by
kt-kernel's converter, which the kt-kernel wheel ships as kt_kernel/sft/convert_kt_to_sglang_adapter.py
(0.7.2; the ktransformers repository also has it under kt-kernel/scripts/). It is run by path: importing
kt_kernel would load the native extension, which the converter does not need. A plain PEFT adapter is served
as is. Legacy stack (0.4.x): the sglang fork's `convert_lora.py` (repository root, in no wheel) strips PEFT
prefixes. KT LoRA serving needs `--kt-num-gpu-experts 0`.
"""

from __future__ import annotations

import filecmp
import json
import math
import os
import re
import shlex
import shutil
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from ktinfra.bench.client import (
    MAX_TIMEOUT_S,
    TimedOut,
    UnexpectedReply,
    check_not_v1,
    check_url,
    error_body,
    whole_body,
)
from ktinfra.bench.deadline import new_session, request_deadline, socks_proxy_problem
from ktinfra.bench.reply import token_counts
from ktinfra.plan.serve import LORA_MIN_RUNNING_REQUESTS, deferred_experts
from ktinfra.render.common import INSTANCE_NAME
from ktinfra.render.convert import KT_LORA_SCRIPT, LEGACY_LORA_SCRIPT
from ktinfra.render.serve import LORA_BACKENDS  # the GPU ones render accepts: one list

CONFIG_FILE = "adapter_config.json"
WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
KT_FUSED_FILE = "fused_expert_lora.safetensors"
ADDED_TOKENS_FILE = "added_tokens.json"  # srt/lora/lora_config.py get_added_tokens_config
# sglang-kt 0.7.2: server_args.py KT_EXPERT_LORA_MODULES; kt_ep_wrapper.py _KT_SFT_METHOD_BY_INFERENCE_METHOD
KT_EXPERT_LORA_MODULES = ("gate_proj", "up_proj", "down_proj")
KT_LORA_METHODS = frozenset({"AMXBF16", "BF16", "AMXFP8", "FP8", "AMXINT8", "AMXINT4", "RAWINT4", "MXFP4"})
KT_MANIFEST_FILE = "kt_adapter_manifest.json"
KT_FULL_EXPERTS_INDEX = "kt_full_experts.index.json"
KT_FUSED_KEY = re.compile(r"^layers\.(\d+)\.experts\.(gate|up|down)_lora_(a|b)$")

CURRENT_CONVERTER = "kt-kernel/scripts/convert_kt_to_sglang_adapter.py"
INSTALLED_CONVERTER = "kt_kernel/sft/convert_kt_to_sglang_adapter.py"  # inside the kt-kernel wheel
LEGACY_CONVERTER = "convert_lora.py"
CONVERTER_ENV = "KTINFRA_LORA_CONVERTER"
# Source checkouts, tried after the converter installed with kt-kernel: render's defaults (legacy: the sglang
# checkout kt_python_env makes, profiles.checkout_dir), then the tutorials' usual places.
CONVERTER_SEARCH = {
    "current": [
        Path(KT_LORA_SCRIPT),
        Path("/opt/ktransformers") / CURRENT_CONVERTER,
        Path.home() / "ktransformers" / CURRENT_CONVERTER,
        Path("/root/autodl-tmp/ktransformers") / CURRENT_CONVERTER,
    ],
    "legacy": [
        Path(LEGACY_LORA_SCRIPT),
        Path("/opt/sglang") / LEGACY_CONVERTER,
        Path.home() / "sglang" / LEGACY_CONVERTER,
        Path("/root/autodl-tmp/sglang") / LEGACY_CONVERTER,
    ],
}


class LoraError(ValueError):
    """Bad adapter, bad arguments or a missing converter: raised before anything is written."""


@dataclass
class Adapter:
    name: str
    path: Path
    kind: str  # "peft" | "kt-fused"
    rank: int | None
    alpha: float | None
    target_modules: list[str] = field(default_factory=list)
    base_model: str | None = None
    tensors: int = 0
    expert_lora: bool = False  # LoRA on the routed experts: served by kt-kernel's SFT backend, alone
    warnings: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict, repr=False)  # adapter_config.json as read ({} when none)
    lora_modules: list[str] = field(default_factory=list)  # modules the lora_A tensors name (q_proj, ...)
    nonexpert_tensors: int = 0  # tensors of adapter_model.safetensors not on the routed experts

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "path": str(self.path),
            "kind": self.kind,
            "rank": self.rank,
            "alpha": self.alpha,
            "target_modules": self.target_modules,
            "base_model": self.base_model,
            "tensors": self.tensors,
            "expert_lora": self.expert_lora,
            "warnings": self.warnings,
        }


def safetensors_header(path: Path) -> dict:
    """Tensor names -> {dtype, shape}, read from the file header without loading tensors."""
    try:
        with path.open("rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            if size <= 0 or size > 100_000_000:
                raise LoraError(f"{path}: not a safetensors file (header size {size})")
            header = json.loads(handle.read(size))
    except LoraError:
        raise
    except (struct.error, ValueError, RecursionError) as exc:  # ValueError: bad JSON, not UTF-8, huge ints
        raise LoraError(f"{path}: not a readable safetensors file ({_json_problem(exc)})") from exc
    if not isinstance(header, dict):
        raise LoraError(f"{path}: not a safetensors file (its header is not a JSON object)")
    header.pop("__metadata__", None)
    for name, info in header.items():
        shape = info.get("shape") if isinstance(info, dict) else None
        if not isinstance(shape, list) or not all(_is_size(dim) for dim in shape):
            raise LoraError(f"{path}: tensor {name!r} has no valid shape in the safetensors header")
    return header


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_number(value: object) -> bool:
    """A finite int or float (JSON's NaN, Infinity and 1e999 are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _json_problem(exc: BaseException) -> str:
    """One line about why JSON text could not be read."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: {exc}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _read_json(path: Path) -> object:
    """A JSON file ktinfra reads; garbage, non-UTF-8 text and absurd nesting become a LoraError."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise LoraError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise LoraError(f"{path}: invalid JSON ({_json_problem(exc)})") from exc


def parse_adapter_spec(spec: str) -> tuple[str, Path]:
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise LoraError(f"--adapter must be NAME=TRAIN_OUTPUT_DIR, got {spec!r}")
    if not INSTANCE_NAME.fullmatch(name):  # it becomes a systemd instance name; "." and ".." name directories
        raise LoraError(
            f"adapter name {name!r} must start with a letter or digit and use only letters, digits, "
            "'_', '.', '-' (at most 64)"
        )
    return name, Path(path).expanduser()


def _check_peft_tensors(adapter: Adapter, weights: Path) -> None:
    if weights.suffix != ".safetensors":
        adapter.warnings.append(f"{weights.name}: pickled weights are not inspected; prefer safetensors")
        return
    header = safetensors_header(weights)
    lora_experts = [k for k in header if ".lora_experts." in k]
    if lora_experts:
        raise LoraError(
            f"{weights}: KT LoRA-Experts tensors ({lora_experts[0]}, ...) are not LoRA deltas; neither "
            "kt-kernel's converter nor SGLang serves them"
        )
    lora_a = {k: v for k, v in header.items() if ".lora_A." in k}
    lora_b = {k: v for k, v in header.items() if ".lora_B." in k}
    if not lora_a or len(lora_a) != len(lora_b):
        raise LoraError(
            f"{weights}: expected matching lora_A/lora_B tensors, found {len(lora_a)}/{len(lora_b)}"
        )
    if any(not v["shape"] for v in lora_a.values()):
        raise LoraError(f"{weights}: a lora_A tensor is a scalar; its first dimension is the rank")
    ranks = {v["shape"][0] for v in lora_a.values()}
    if adapter.rank is not None and ranks != {adapter.rank}:
        raise LoraError(
            f"{weights}: lora_A ranks {sorted(ranks)} do not match r={adapter.rank} in {CONFIG_FILE}"
        )
    adapter.tensors += len(header)
    adapter.expert_lora = adapter.expert_lora or any(_is_expert_lora_key(k) for k in header)
    adapter.nonexpert_tensors += sum(not _is_expert_lora_key(k) for k in header)
    adapter.lora_modules = sorted({k.split(".lora_A.")[0].rsplit(".", 1)[-1] for k in lora_a})
    _check_declared_modules(adapter, weights, header)


def _check_declared_modules(adapter: Adapter, weights: Path, header: dict) -> None:
    """The tensors against what adapter_config.json declares: none saved whole (_check_whole_tensors), and the
    vocabulary-sized modules (embed_tokens, lm_head) must be in target_modules exactly when their LoRA is in
    the file: SGLang skips the tensors of one target_modules does not name (srt/lora/lora.py
    _process_weight), sglang-kt takes a merged KT adapter's targets from its tensors instead
    (server_args.py _prepare_kt_composite_lora_adapter), and ktinfra's backend and tensor-parallel checks read
    target_modules: a mismatch serves another adapter than the one checked."""
    _check_added_tokens(weights, header)
    _check_whole_tensors(weights, header)
    targets = adapter.config.get("target_modules")
    if not isinstance(targets, list):  # none, or a PEFT regex: SGLang and the converter go by the tensors
        return
    in_file: dict[str, str] = {}
    for key in header:
        module = vocab_module(key.split(".lora_", 1)[0])
        if module:
            in_file.setdefault(module, key)
    in_config = {vocab_module(t): t for t in targets if isinstance(t, str) and vocab_module(t)}
    config_path = adapter.path / CONFIG_FILE
    undeclared = sorted(in_file.keys() - in_config.keys())
    if undeclared:
        module = undeclared[0]
        raise LoraError(
            f"{config_path}: target_modules {json.dumps(targets)} does not name {module}, but {weights.name} "
            f"holds its LoRA ({in_file[module]}): SGLang drops those tensors of a plain adapter (srt/lora/"
            "lora.py skips a module target_modules does not name) and serves them from a merged KT adapter "
            f"(sglang-kt reads its targets from the tensors): add {module!r} to target_modules, or remove "
            "those tensors"
        )
    for module in sorted(in_config.keys() - in_file.keys()):  # SGLang wraps it, with nothing trained there
        adapter.warnings.append(
            f"target_modules names {in_config[module]!r}, but {weights.name} holds no LoRA for {module} "
            f"(an incomplete save or an edited {CONFIG_FILE}?): nothing trained there is served"
        )


_LAYER_KEY = re.compile(r"layers\.\d+\.")  # SGLang's get_layer_id


def _added_token_embedding(key: str) -> bool:
    """A tensor SGLang takes as the embeddings of added tokens (srt/lora/lora.py _process_weight)."""
    if _LAYER_KEY.search(key) or "embed_tokens" in key or "lm_head" in key:
        return False
    return "input_embeddings" in key or "output_embeddings" in key


def _check_added_tokens(weights: Path, header: dict) -> None:
    """Embeddings of tokens added to the vocabulary (input_embeddings/output_embeddings) are served by no
    stack: sglang-kt refuses an adapter with added_tokens.json at start (srt/lora/lora_manager.py
    validate_new_adapter), and without that file srt/lora/lora.py _process_weight asserts that their rows
    equal its (zero) added tokens, so loading fails; the legacy fork copies input_embeddings only beside
    embed_tokens/lm_head LoRA and output_embeddings nowhere (mem_pool.py load_lora_weight_to_buffer), and
    either way the server tokenizes with the base model's tokenizer, which has no added token."""
    added = [k for k in header if _added_token_embedding(k) and header[k]["shape"][:1] != [0]]
    if not added:
        return
    listed = _added_tokens_counted(weights.parent / ADDED_TOKENS_FILE)
    start = (
        f"with {ADDED_TOKENS_FILE} beside it, sglang-kt refuses the adapter at start "
        "(srt/lora/lora_manager.py validate_new_adapter: 'LoRA serving currently doesn't support adapters "
        "that add tokens to the vocabulary')"
        if listed
        else f"without {ADDED_TOKENS_FILE}, loading the adapter fails on srt/lora/lora.py _process_weight's "
        "assert that their rows equal the added tokens it lists (none; so does one SGLang counts no token "
        "in: empty, or no JSON)"
    )
    raise LoraError(
        f"{weights}: {', '.join(added[:2])}{', ...' if len(added) > 2 else ''}: embeddings of tokens added "
        f"to the vocabulary, which SGLang does not serve: {start}; the legacy fork loads "
        "input_embeddings only beside embed_tokens/lm_head LoRA and output_embeddings nowhere (srt/lora/"
        "mem_pool.py load_lora_weight_to_buffer), and the server tokenizes with the base model's tokenizer: "
        "export a merged model with the resized vocabulary (llamafactory-cli export)"
    )


def _sglang_added_tokens(path: Path) -> object:
    """An adapter's added_tokens.json as sglang-kt reads it (srt/lora/lora_config.py
    get_added_tokens_config: open() as text, json.load, only a JSONDecodeError caught): None where it has none
    (no file, a JSON syntax error, a UTF-8 BOM among them); UnicodeDecodeError or RecursionError where reading
    it there fails, which stops the adapter's load."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _added_tokens_counted(path: Path) -> bool:
    """Whether sglang-kt counts tokens in an adapter's added_tokens.json (lora_config.py: len() of its JSON),
    or cannot read it at all (which stops the load at start too)."""
    try:
        listed = _sglang_added_tokens(path)
    except (UnicodeDecodeError, RecursionError):
        return True
    return bool(listed) if isinstance(listed, (dict, list, str)) else listed is not None


def _frozen_vocab_base(key: str, header: dict) -> bool:
    """The base weight of an embed_tokens/lm_head the file holds LoRA for: PEFT's save_pretrained
    (save_embedding_layers "auto", the default) saves it beside embedding LoRA, frozen, the base model's own;
    SGLang skipping it changes nothing."""
    module, sep, _ = key.rpartition(".base_layer.")
    if not sep or _LAYER_KEY.search(key) or vocab_module(module) is None:
        return False
    return any(other.startswith(f"{module}.lora_") for other in header)


def _check_whole_tensors(weights: Path, header: dict) -> None:
    """A tensor that is no LoRA factor is a module saved whole (PEFT modules_to_save, trainable tokens; with
    modules_to_save declared, _check_served_scaling refused the adapter already), which SGLang does not serve
    (sglang-kt 0.7.2 and the legacy fork alike): srt/lora/lora.py _process_weight keeps one outside the
    decoder layers only for embed_tokens/lm_head, where mem_pool.py load_lora_weight_to_buffer copies only
    lora_A/lora_B names (a whole lm_head.weight goes nowhere, with no message), and it puts one inside a
    layer beside the LoRA, where mem_pool.py loads it as its module's lora_B."""
    whole = [
        k
        for k in header
        if ".lora_" not in k and not _added_token_embedding(k) and not _frozen_vocab_base(k, header)
    ]
    if not whole:
        return
    shown = ", ".join(whole[:3]) + (", ..." if len(whole) > 3 else "")
    fates = []
    if any(not _LAYER_KEY.search(k) for k in whole):
        fates.append(
            "SGLang skips those outside the decoder layers without a message (srt/lora/lora.py "
            "_process_weight; mem_pool.py loads only the lora_A/lora_B of embed_tokens and lm_head), so the "
            "adapter would be served without what was trained there"
        )
    if any(_LAYER_KEY.search(k) for k in whole):
        fates.append(
            "SGLang loads those inside a decoder layer as their module's lora_B (srt/lora/mem_pool.py "
            "load_lora_weight_to_buffer), and loading the adapter fails (a KeyError, a shape assert, or "
            "'Cannot find target module name')"
        )
    raise LoraError(
        f"{weights}: {len(whole)} tensor(s) are no LoRA factor ({shown}): modules saved whole (PEFT "
        f"modules_to_save, trainable tokens, a resized vocabulary), though {CONFIG_FILE} declares no "
        f"modules_to_save. {'; '.join(fates)}: export a merged model (llamafactory-cli export) if they were "
        "trained, or save the adapter without them"
    )


def _is_expert_lora_key(key: str) -> bool:
    """A LoRA tensor of a routed expert, as sglang-kt tells a merged KT adapter from a plain one."""
    return ".mlp.experts." in key and any(f".{module}." in key for module in KT_EXPERT_LORA_MODULES)


# Rank sits in dim 1 of lora_a [E, r, in] and dim 2 of lora_b [E, out, r] (kt_kernel/sft/lora.py buffers).
_RANK_DIM = {"a": 1, "b": 2}


def _check_kt_fused(adapter: Adapter, fused: Path) -> int:
    """The checks kt-kernel's converter makes, before it runs: key names, 3D, one expert count, one rank;
    plus the hidden/intermediate sizes agreeing between the six tensors of a layer. Returns the rank."""
    header = safetensors_header(fused)
    bad = [k for k in header if not KT_FUSED_KEY.match(k)]
    if bad or not header:
        raise LoraError(
            f"{fused}: unexpected tensor names {bad[:3]} (want layers.N.experts.<gate|up|down>_lora_<a|b>)"
        )
    not_3d = [k for k, v in header.items() if len(v["shape"]) != 3]
    if not_3d:
        raise LoraError(f"{fused}: fused expert LoRA tensors must be 3D [experts, ...]: {not_3d[:3]}")
    layers: dict[str, dict[str, list[int]]] = {}
    ranks, experts = set(), set()
    for key, value in header.items():
        layer, proj, ab = KT_FUSED_KEY.match(key).groups()
        layers.setdefault(layer, {})[f"{proj}_{ab}"] = value["shape"]
        ranks.add(value["shape"][_RANK_DIM[ab]])
        experts.add(value["shape"][0])
    if len(experts) != 1 or len(ranks) != 1:
        raise LoraError(f"{fused}: expert counts {sorted(experts)} and ranks {sorted(ranks)} must be single")
    for layer, shapes in sorted(layers.items(), key=lambda item: int(item[0])):
        if len(shapes) != 6:
            adapter.warnings.append(f"{fused.name}: layer {layer} has only {sorted(shapes)} of the six")
            continue
        hidden = {shapes["gate_a"][2], shapes["up_a"][2], shapes["down_b"][1]}
        inter = {shapes["gate_b"][1], shapes["up_b"][1], shapes["down_a"][2]}
        if len(hidden) != 1 or len(inter) != 1:
            raise LoraError(f"{fused}: layer {layer} tensors disagree on hidden/intermediate size: {shapes}")
    adapter.tensors += len(header)
    return ranks.pop()


def _check_kt_manifest(adapter: Adapter, path: Path, rank: int) -> None:
    """kt-kernel writes kt_adapter_manifest.json last, status "ready", with each file's size; a missing or
    stale one means the save was interrupted or the files were replaced afterwards."""
    manifest = path / KT_MANIFEST_FILE
    if not manifest.is_file():
        adapter.warnings.append(
            f"no {KT_MANIFEST_FILE} (kt-kernel 0.7 writes it when a save completes): provenance not checked"
        )
        return
    payload = _read_json(manifest)
    if not isinstance(payload, dict) or payload.get("status") != "ready":
        raise LoraError(f"{manifest}: status is not 'ready'; the KT adapter save did not finish")
    artifacts = payload.get("artifacts") or {}
    if not isinstance(artifacts, dict) or KT_FUSED_FILE not in artifacts:
        raise LoraError(f"{manifest}: artifacts do not list {KT_FUSED_FILE}")
    for name, record in artifacts.items():
        file = path / Path(name).name
        size = file.stat().st_size if file.is_file() else None
        recorded = record.get("size") if isinstance(record, dict) else None
        if recorded != size:
            raise LoraError(f"{manifest}: {name} is {size} bytes, the manifest says {recorded}")
    lora_info = payload.get("lora")
    manifest_rank = lora_info.get("rank") if isinstance(lora_info, dict) else None
    if manifest_rank is not None and manifest_rank != rank:
        raise LoraError(f"{manifest}: lora.rank {manifest_rank} but the fused tensors have rank {rank}")


def _check_kt_output(adapter: Adapter, path: Path, weights: Path | None) -> None:
    rank = _check_kt_fused(adapter, path / KT_FUSED_FILE)
    if weights is not None and weights.suffix != ".safetensors":
        raise LoraError(
            f"{weights}: kt-kernel's converter reads only adapter_model.safetensors; the LoRA in "
            f"{weights.name} would be dropped (save with safetensors)"
        )
    if weights is not None and adapter.rank is not None and adapter.rank != rank:
        raise LoraError(f"{CONFIG_FILE} r={adapter.rank} but the fused expert LoRA has rank {rank}")
    if adapter.rank is None:
        adapter.rank = rank
    _check_kt_manifest(adapter, path, rank)


def _read_config(config_path: Path) -> dict:
    """adapter_config.json, with the fields ktinfra reads checked for type."""
    config = _read_json(config_path)
    if not isinstance(config, dict):
        raise LoraError(f"{config_path}: must hold a JSON object (PEFT's LoraConfig)")
    if str(config.get("peft_type", "LORA")).upper() != "LORA":
        raise LoraError(f"{config_path}: peft_type {config.get('peft_type')!r} is not LORA")
    rank, alpha = config.get("r"), config.get("lora_alpha")
    if rank is not None and (not _is_size(rank) or rank < 1):
        raise LoraError(f"{config_path}: r must be a positive integer, got {rank!r}")
    if alpha is not None and (not _is_number(alpha) or alpha <= 0):
        raise LoraError(f"{config_path}: lora_alpha must be a finite number above 0, got {alpha!r}")
    targets = config.get("target_modules") or []
    if not isinstance(targets, (str, list)) or not all(isinstance(t, str) for t in targets):
        raise LoraError(f"{config_path}: target_modules must be a string or a list of strings")
    if not isinstance(config.get("base_model_name_or_path", ""), (str, type(None))):  # 0/false/[] too
        raise LoraError(f"{config_path}: base_model_name_or_path must be a string")
    _check_served_scaling(config_path, config)
    return config


def _check_served_scaling(config_path: Path, config: dict) -> None:
    """SGLang (sglang-kt 0.7.2 and the legacy fork, srt/lora/lora.py) serves lora_A/lora_B only, every module
    scaled by lora_alpha / r: PEFT options that train another sum would be served as a different model, with
    no error."""
    rank, alpha = config.get("r"), config.get("lora_alpha")
    alpha = 8 if alpha is None else alpha  # PEFT's LoraConfig default
    saved = config.get("modules_to_save")
    if saved:
        raise LoraError(
            f"{config_path}: modules_to_save {saved!r} is set; PEFT saved those modules' fully trained "
            "weights beside the LoRA, and SGLang loads lora_A/lora_B only (srt/lora/lora.py), so they "
            "would be served untrained: export a merged model (llamafactory-cli export) or train without "
            "them (LLaMA-Factory additional_target, resize_vocab)"
        )
    bias, lora_bias = config.get("bias", "none"), config.get("lora_bias")
    if bias not in (None, "none") or lora_bias:
        what = f"bias {bias!r}" if bias not in (None, "none") else "lora_bias"
        raise LoraError(
            f"{config_path}: {what} is set; PEFT saved trained bias tensors beside lora_A/lora_B, and SGLang "
            "loads every other tensor of a layer as a lora_B (srt/lora/mem_pool.py), so they would replace "
            "it or stop the server: export a merged model (llamafactory-cli export) or train with bias "
            "'none'"
        )
    if config.get("use_dora"):
        raise LoraError(
            f"{config_path}: use_dora is set; SGLang serves the lora_A/lora_B delta only and drops DoRA's "
            "magnitude vectors: export a merged model (llamafactory-cli export) or train without use_dora"
        )
    if config.get("use_rslora") and _is_size(rank) and rank > 0:
        served = alpha * math.sqrt(rank)
        raise LoraError(
            f"{config_path}: use_rslora is set; PEFT scales it by lora_alpha/sqrt(r) = "
            f"{alpha / math.sqrt(rank):.4g}, SGLang by lora_alpha/r = {alpha / rank:.4g}: serve a copy "
            f"whose adapter_config.json has use_rslora false and lora_alpha {served:.6g} (the same scaling)"
        )
    for key, base in (("rank_pattern", rank), ("alpha_pattern", alpha)):
        pattern = config.get(key)
        if pattern in (None, {}):
            continue
        if not isinstance(pattern, dict):
            raise LoraError(f"{config_path}: {key} must be a JSON object of module patterns")
        odd = next(((module, value) for module, value in pattern.items() if value != base), None)
        if odd:
            module, value = odd
            raise LoraError(
                f"{config_path}: {key} gives {module!r} {value} instead of {base}; SGLang serves one r and "
                "lora_alpha per adapter: export a merged model (llamafactory-cli export) instead"
            )


def inspect_adapter(name: str, path: Path, base: str | None = None) -> Adapter:
    if not path.is_dir():
        raise LoraError(f"adapter {name}: directory not found: {path}")
    config_path = path / CONFIG_FILE
    fused = path / KT_FUSED_FILE
    config: dict = {}
    if config_path.is_file():
        config = _read_config(config_path)
    elif not fused.is_file():
        raise LoraError(
            f"adapter {name}: {path} has no {CONFIG_FILE}; is it a LoRA training output directory?"
        )
    targets = config.get("target_modules") or []
    adapter = Adapter(
        name=name,
        path=path.resolve(),
        kind="kt-fused" if fused.is_file() else "peft",
        expert_lora=fused.is_file(),  # kt-kernel's converter merges the fused experts into the adapter
        rank=config.get("r"),
        alpha=config.get("lora_alpha"),
        target_modules=[targets] if isinstance(targets, str) else list(targets),
        base_model=config.get("base_model_name_or_path"),
        config=config,
    )
    weights = next((path / w for w in WEIGHT_FILES if (path / w).is_file()), None)
    if weights is None and adapter.kind == "peft":
        raise LoraError(f"adapter {name}: {path} has {CONFIG_FILE} but no {' or '.join(WEIGHT_FILES)}")
    if (path / KT_FULL_EXPERTS_INDEX).is_file():
        raise LoraError(
            f"adapter {name}: {path} holds fully trained expert weights ({KT_FULL_EXPERTS_INDEX}); "
            "an adapter cannot carry them, serve a merged model instead"
        )
    if weights is not None:
        _check_peft_tensors(adapter, weights)
    if adapter.kind == "kt-fused":
        _check_kt_output(adapter, path, weights)
    if adapter.rank is None and adapter.kind == "peft":
        raise LoraError(f"{config_path}: missing r (LoRA rank)")
    if base and adapter.base_model and Path(adapter.base_model).name != Path(base.rstrip("/")).name:
        adapter.warnings.append(f"trained on {adapter.base_model!r}, serving on {base!r}")
    return adapter


def check_legacy_adapters(adapters: list[Adapter], legacy: bool) -> None:
    """The legacy stack's sglang fork (0.4.x) has no KT expert LoRA: its convert_lora.py copies
    fused_expert_lora.safetensors unconverted, and its LoRA loader takes those tensors as weights of their
    layer (srt/lora/lora.py initialize_weights), so the expert LoRA would not be served."""
    fused = next((a for a in adapters if a.kind == "kt-fused"), None) if legacy else None
    if fused is not None:
        raise LoraError(
            f"adapter {fused.name}: {fused.path} holds kt-kernel's fused expert LoRA ({KT_FUSED_FILE}), "
            "which the legacy stack's sglang fork does not serve (it has no KT expert LoRA): serve it on the "
            "current stack, without --legacy"
        )


def check_alpha_flag(adapters: list[Adapter], lora_alpha: float | None, legacy: bool) -> None:
    """--lora-alpha fills in a missing lora_alpha, nothing more: kt-kernel's converter keeps the input's own
    (convert_kt_to_sglang_adapter.py _build_adapter_config), SGLang serves a PEFT adapter's as it is, and the
    legacy convert_lora.py takes none. A flag that would be dropped is refused rather than ignored: what the
    user meant (this scaling) is not what would be served."""
    if lora_alpha is None:
        return
    if legacy:
        raise LoraError(
            "--lora-alpha applies to kt-kernel's converter only; the legacy convert_lora.py keeps the "
            f"adapter's lora_alpha (drop --legacy, or --lora-alpha and set lora_alpha in {CONFIG_FILE})"
        )
    for adapter in adapters:
        if adapter.alpha is not None and adapter.alpha != lora_alpha:
            raise LoraError(
                f"adapter {adapter.name}: its {CONFIG_FILE} has lora_alpha {adapter.alpha:g}, which is what "
                f"gets served (scaling lora_alpha/r); --lora-alpha {lora_alpha:g} only fills in a missing "
                f"one and would be ignored: drop it, or serve a copy whose {CONFIG_FILE} has lora_alpha "
                f"{lora_alpha:g}"
            )


def check_training_outputs(adapters: list[Adapter], legacy: bool, lora_alpha: float | None = None) -> None:
    """What `lora serve` and `render lora-convert` refuse of inspected training outputs before converting:
    a KT output on the legacy stack, an adapter of expert LoRA only (current stack), a --lora-alpha the
    conversion would drop; on the legacy stack also an adapter_config.json the fork cannot start with
    (check_served_as_is), since its convert_lora.py copies that file as it is (only the tensor names
    change), where kt-kernel's converter writes its own."""
    check_legacy_adapters(adapters, legacy)
    if not legacy:
        for adapter in adapters:
            check_nonexpert_lora(adapter)
    check_alpha_flag(adapters, lora_alpha, legacy)
    if legacy:
        for adapter in adapters:
            check_served_as_is(adapter, legacy)


def check_conversion_input(path: Path, legacy: bool, lora_alpha: float | None = None) -> None:
    """`render lora-convert`'s --adapter, where this host can read it (the unit may be rendered away from
    the training output): inspect_adapter and check_training_outputs as `lora serve` runs them, and on the
    current stack a KT training output, the only input kt-kernel's converter takes (it stops without
    fused_expert_lora.safetensors)."""
    if not path.is_dir():
        return
    adapter = inspect_adapter(path.name, path)
    check_training_outputs([adapter], legacy, lora_alpha)
    if not legacy and adapter.kind != "kt-fused":
        merged = "already converted" if adapter.expert_lora else "a PEFT adapter"
        raise LoraError(
            f"adapter {path} is {merged}, not a KT training output ({KT_FUSED_FILE}): kt-kernel's converter "
            "stops without that file, and SGLang serves this directory as it is (ktinfra lora plan)"
        )


def needs_conversion(adapter: Adapter, legacy: bool) -> bool:
    return legacy or adapter.kind == "kt-fused"


# sglang-kt 0.7.2 srt/lora/lora_config.py and lora.py read these from adapter_config.json with [key]: one
# missing stops the server at start (KeyError), after ktinfra rendered and started it.
SGLANG_CONFIG_KEYS = ("peft_type", "r", "lora_alpha", "target_modules")


def check_served_as_is(
    adapter: Adapter, legacy: bool = False, served_base: str | None = None, copied: bool = False
) -> None:
    """A PEFT adapter the current stack serves without conversion: what sglang-kt 0.7.2 reads of its
    adapter_config.json must be there, and target_modules a list. A string (a PEFT regex, "all-linear")
    stops the server at start unless --lora-target-modules is given (lora_manager.py init_lora_shapes),
    and ktinfra renders no such flag. sglang-kt also refuses a non-empty added_tokens.json
    (_check_added_tokens_file, against `served_base`'s tokenizer where given; not `legacy`: the fork has no
    such check; not `copied`: served from a copy without the file, base_added_tokens)."""
    config_path = adapter.path / CONFIG_FILE
    missing = [key for key in SGLANG_CONFIG_KEYS if key not in adapter.config]
    if missing:
        raise LoraError(
            f"{config_path}: no {', '.join(missing)}; SGLang reads {', '.join(SGLANG_CONFIG_KEYS)} from it "
            "and stops at start without them: add them (PEFT writes all four)"
        )
    targets = adapter.config["target_modules"]
    if not isinstance(targets, list):
        listed = json.dumps(adapter.lora_modules) if adapter.lora_modules else "a list of module names"
        raise LoraError(
            f"{config_path}: target_modules is the string {targets!r}; SGLang takes only a list of module "
            "names from an adapter (it stops at start otherwise, and ktinfra renders no "
            f"--lora-target-modules): write the modules the adapter's tensors name, {listed}"
        )
    if not legacy and not copied:
        _check_added_tokens_file(adapter, served_base)


def _served_tokenizer(adapter: Adapter, served_base: str | None) -> tuple[Path, dict[str, int]] | None:
    """The tokenizer.json an adapter's added tokens are compared with, and its token ids: the served model's
    (`lora serve --base`) where it is readable here, else that of the adapter's base_model_name_or_path."""
    for base in (served_base, adapter.base_model):
        ids = _base_tokenizer_ids(base)
        if ids is not None:
            return Path(base) / "tokenizer.json", ids
    return None


def _tokens_not_in(listed: dict, ids: dict[str, int]) -> list[str]:
    """`token id` of each added_tokens.json entry the tokenizer does not hold with that very id."""
    return [f"{t} {i}" for t, i in listed.items() if type(i) is not int or ids.get(t) != i]


def base_added_tokens(adapter: Adapter, served_base: str | None) -> tuple[Path, int] | None:
    """Where sglang-kt counts tokens in the adapter's added_tokens.json and every entry has the same id in the
    served model's tokenizer (_served_tokenizer): that tokenizer.json and the number of entries. A copy of the
    adapter without the file then serves the same tokens (SGLang tokenizes with the model's tokenizer); None
    in every other case (no such file, one sglang-kt cannot read, a token the tokenizer lacks or numbers
    otherwise, no tokenizer here to compare with)."""
    try:
        listed = _sglang_added_tokens(adapter.path / ADDED_TOKENS_FILE)
    except (UnicodeDecodeError, RecursionError):
        return None
    found = _served_tokenizer(adapter, served_base) if isinstance(listed, dict) and listed else None
    if found is None or _tokens_not_in(listed, found[1]):
        return None
    return found[0], len(listed)


def _check_added_tokens_file(adapter: Adapter, served_base: str | None = None) -> None:
    """sglang-kt counts the entries of the adapter's added_tokens.json (srt/lora/lora_config.py
    get_added_tokens_config: open() as text, json.load, only a JSONDecodeError is caught, logged and
    counted as none) and refuses the adapter at start when there is one (lora_manager.py
    validate_new_adapter), whatever its tensors hold or whether the base model has the tokens.
    LLaMA-Factory saves the tokenizer beside the adapter, and transformers 4.x writes this file for each token
    at or past its base vocabulary (Qwen's special tokens), so a Qwen LoRA trained with it has one."""
    path = adapter.path / ADDED_TOKENS_FILE
    try:
        listed = _sglang_added_tokens(path)
    except (UnicodeDecodeError, RecursionError) as err:
        raise LoraError(
            f"{path}: sglang-kt cannot read it ({type(err).__name__}; it catches only a JSON syntax "
            f"error) and fails to load the adapter at start: remove {ADDED_TOKENS_FILE} from the copy "
            "you serve"
        ) from None
    if listed is None or (isinstance(listed, (dict, list, str)) and not listed):
        return
    if not isinstance(listed, (dict, list, str)):
        raise LoraError(
            f"{path}: holds {json.dumps(listed)}, not a JSON object; sglang-kt takes its len() and fails to "
            f"load the adapter at start: remove {ADDED_TOKENS_FILE} from the copy you serve"
        )
    shown = ", ".join(f"{k} {v}" for k, v in list(listed.items())[:3]) if isinstance(listed, dict) else ""
    refused = (
        f"{path}: lists tokens added to the tokenizer{f' ({shown}, ...)' if shown else ''}, and sglang-kt "
        f"refuses an adapter with a non-empty {ADDED_TOKENS_FILE} at start, whatever its tensors hold "
        "(srt/lora/lora_manager.py validate_new_adapter: 'LoRA serving currently doesn't support adapters "
        "that add tokens to the vocabulary'). "
    )
    served = shlex.quote(f"{adapter.path}-served")
    copy = (
        f"serve a copy of the adapter without the file (cp -r {shlex.quote(str(adapter.path))} {served} && "
        f"rm {served}/{ADDED_TOKENS_FILE}; the server tokenizes with the base model's tokenizer)"
    )
    merged = "export a merged model (llamafactory-cli export) and serve it without --lora"
    found = _served_tokenizer(adapter, served_base) if isinstance(listed, dict) else None
    if found is None:
        raise LoraError(
            refused + "LLaMA-Factory saves the tokenizer beside the adapter, and transformers 4.x writes "
            "this file for the special tokens of a Qwen model: where each entry has the same id in the "
            "served model's own tokenizer (its tokenizer.json added_tokens), " + copy + "; a token that "
            "tokenizer lacks (added for training) sglang-kt does not serve through LoRA: " + merged
        )
    tokenizer, base_ids = found
    foreign = _tokens_not_in(listed, base_ids)
    if not foreign:
        raise LoraError(
            refused + f"Each entry has the same id in the base model's tokenizer ({tokenizer}), so "
            "nothing is lost without it: " + copy + "; `ktinfra lora serve` makes such a copy itself"
        )
    raise LoraError(
        refused + f"{len(foreign)} of them the base model's tokenizer ({tokenizer}) does not hold with that "
        f"id ({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}): the adapter was trained with "
        "tokens the base model lacks, which sglang-kt does not serve through LoRA: " + merged
    )


def _base_tokenizer_ids(base_model: object) -> dict[str, int] | None:
    """token -> id of the base model's tokenizer.json (vocabulary and added_tokens), where the adapter's
    base_model_name_or_path is a directory here holding one (LLaMA-Factory writes model_name_or_path)."""
    if not isinstance(base_model, str) or not base_model:
        return None
    try:
        tokenizer = json.loads((Path(base_model) / "tokenizer.json").read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(tokenizer, dict):
        return None
    model = tokenizer.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    ids = {t: i for t, i in vocab.items() if isinstance(i, int)} if isinstance(vocab, dict) else {}
    for entry in tokenizer.get("added_tokens") or []:
        content, index = (entry.get("content"), entry.get("id")) if isinstance(entry, dict) else (None, None)
        if isinstance(content, str) and isinstance(index, int):
            ids[content] = index
    return ids


# Finds the package without importing it: kt_kernel/__init__ loads the native extension (CPU-variant
# detection, torch), which the converter does not need and which fails where no variant fits the CPU.
_LOCATE_KT_KERNEL = (
    "import importlib.util, json; spec = importlib.util.find_spec('kt_kernel'); "
    "print(json.dumps(list(spec.submodule_search_locations or []) if spec else []))"
)


def installed_converter(python: str | Path) -> Path | None:
    """kt-kernel's convert_kt_to_sglang_adapter.py inside the environment of `python`, or None when that
    python is not on this machine, has no kt_kernel, or a kt-kernel that does not ship the script."""
    exe = shutil.which(str(python))
    if exe is None:
        return None
    try:
        proc = subprocess.run(
            [exe, "-c", _LOCATE_KT_KERNEL], capture_output=True, text=True, timeout=60, cwd="/", check=False
        )
        locations = json.loads(proc.stdout) if proc.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        return None
    for location in locations:
        script = Path(location).parent / INSTALLED_CONVERTER
        if script.is_file():
            return script.resolve()
    return None


def find_converter(legacy: bool, explicit: Path | None = None, python: str | None = None) -> Path:
    """--converter, else $KTINFRA_LORA_CONVERTER, else (current stack) the one installed in `python`'s env,
    else the usual source checkouts."""
    generation = "legacy" if legacy else "current"
    if explicit or os.environ.get(CONVERTER_ENV):
        candidate = explicit or Path(os.environ[CONVERTER_ENV])
        if candidate.is_file():
            return candidate.resolve()
        source = "--converter" if explicit else f"${CONVERTER_ENV}"
        raise LoraError(f"{generation} adapter converter from {source} not found: {candidate}")
    looked = []
    if not legacy and python:
        installed = installed_converter(python)
        if installed is not None:
            return installed
        looked.append(f"{INSTALLED_CONVERTER} in the env of {python}")
    for candidate in CONVERTER_SEARCH[generation]:
        if candidate.is_file():
            return candidate.resolve()
        looked.append(str(candidate))
    wanted = LEGACY_CONVERTER + " (sglang fork)" if legacy else "convert_kt_to_sglang_adapter.py (kt-kernel)"
    raise LoraError(
        f"{generation} adapter converter {wanted} not found; looked in: {'; '.join(looked)}. "
        f"Install kt-kernel >= 0.7.2 into --converter-python's env, or pass --converter PATH "
        f"or set {CONVERTER_ENV}"
    )


def check_lora_alpha(lora_alpha: float | None) -> None:
    """--lora-alpha, when given: a finite number above 0 (float() also takes nan and inf)."""
    if lora_alpha is not None and (not _is_number(lora_alpha) or lora_alpha <= 0):
        raise LoraError(f"--lora-alpha must be a finite number above 0, not {lora_alpha!r}")


def check_python(python: str) -> str:
    """The converter's python as an executable path: missing or not executable is a LoraError."""
    exe = shutil.which(python) if python else None
    if exe is None:
        raise LoraError(f"converter python {python!r} not found or not executable (--converter-python)")
    return exe


def conversion_command(
    adapter: Adapter,
    out_dir: Path,
    base: str,
    legacy: bool,
    converter: Path,
    python: str,
    lora_alpha: float | None = None,
) -> list[str]:
    check_lora_alpha(lora_alpha)
    if legacy:
        return [python, str(converter), str(adapter.path), str(out_dir), "--quiet"]
    cmd = [python, str(converter), str(adapter.path), str(out_dir), "--base-model-name-or-path", base]
    if adapter.alpha is None:
        if lora_alpha is None:
            raise LoraError(f"adapter {adapter.name}: no lora_alpha in {CONFIG_FILE}; pass --lora-alpha")
        cmd += ["--lora-alpha", f"{lora_alpha:g}"]
    return cmd


def check_output_path(adapter: Adapter, out_dir: Path) -> None:
    """kt-kernel's converter refuses an output inside (or around) its input; say so before anything runs."""
    out_dir, source = out_dir.resolve(), adapter.path.resolve()
    if out_dir == source or out_dir.is_relative_to(source) or source.is_relative_to(out_dir):
        raise LoraError(f"adapter {adapter.name}: output {out_dir} must be outside its input {source}")


def check_targets_apart(name: str, target: Path, targets: dict[Path, str], inputs: dict[str, Path]) -> None:
    """One conversion's output, against the outputs of the adapters before it (`targets`, output -> name) and
    the input of every adapter of the run: each conversion gets a directory of its own, and none replaces
    (or lands inside, or around) the directory another adapter is read from."""
    target = target.resolve()
    if target in targets:
        raise LoraError(
            f"adapters {targets[target]} and {name} would both be converted into {target}; pass "
            "--output-dir DIR (each adapter goes to DIR/NAME), or serve one training output under one name"
        )
    for other, source in inputs.items():
        source = source.resolve()
        if other != name and (target.is_relative_to(source) or source.is_relative_to(target)):
            raise LoraError(
                f"adapter {name} would be converted into {target}, which adapter {other} is read from; pass "
                "--output-dir DIR outside every adapter's directory"
            )
    targets[target] = name


def default_output(adapter: Adapter, legacy: bool) -> Path:
    return adapter.path.with_name(adapter.path.name + ("_converted" if legacy else "_sglang"))


def output_for(adapter: Adapter, legacy: bool, output_dir: Path | None) -> Path:
    """Where `lora serve` writes an adapter's conversion or served copy: --output-dir/NAME, else beside it."""
    return ((output_dir / adapter.name) if output_dir else default_output(adapter, legacy)).resolve()


def _missing_dirs(path: Path) -> list[Path]:
    """The ancestors of `path` that do not exist yet, deepest first: what mkdir(parents=True) creates."""
    missing = []
    for parent in path.parents:
        if parent.exists() or parent.is_symlink():
            break
        missing.append(parent)
    return missing


def _remove_empty_dirs(dirs: list[Path]) -> None:
    """Remove the directories (deepest first) that are still empty; anything else put there stays."""
    for directory in sorted(set(dirs), key=lambda p: len(p.parts), reverse=True):
        try:
            directory.rmdir()
        except OSError:
            pass


def check_target(adapter: Adapter, out_dir: Path, cmd_for, overwrite: bool = False) -> None:
    """What convert() needs of its output path and converter, checked before anything is created."""
    check_output_path(adapter, out_dir)
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        what = "a symlink" if out_dir.is_symlink() else "not a directory"
        raise LoraError(f"{out_dir} is {what}: a converted adapter is a directory; move it away first")
    if out_dir.exists() and not overwrite:
        raise LoraError(f"{out_dir} already exists; pass --overwrite to replace it")
    check_python(cmd_for(out_dir)[0])


def convert(adapter: Adapter, out_dir: Path, cmd_for, overwrite: bool = False) -> Path:
    """Run the converter into a scratch directory, then move it into place: never a half-written adapter.
    On failure the directories this call created are removed again."""
    check_target(adapter, out_dir, cmd_for, overwrite)

    def run_converter(target: Path) -> None:
        cmd = cmd_for(target)
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, encoding="utf-8", errors="replace", check=False
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument
            raise LoraError(f"cannot run the converter ({cmd[0]}): {exc}") from exc
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise LoraError(f"converter failed (exit {proc.returncode}): {' | '.join(tail)}")
        inspect_adapter(adapter.name, target)  # the result must itself be a valid adapter

    _build_into_place(out_dir, run_converter, "converted adapter")
    return out_dir


def _build_into_place(out_dir: Path, build, what: str) -> None:
    """build(path) makes a directory at path inside a scratch directory beside out_dir, which is then moved
    into place: never a half-written one. On failure the directories this call created are removed again."""
    created = _missing_dirs(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.partial-"))
    except OSError as exc:
        _remove_empty_dirs(created)
        raise LoraError(f"cannot create the output directory for {out_dir}: {exc}") from exc
    target, previous, done = scratch / "adapter", scratch / "previous", False
    try:
        build(target)
        # the previous output is moved aside (removed with the scratch directory), not deleted first: if the
        # new one cannot be moved in (an error, or Ctrl-C between the two moves), the previous one goes back
        # in the finally below and the server keeps its adapter
        if out_dir.exists():
            os.replace(out_dir, previous)
        try:
            os.replace(target, out_dir)
        except OSError as exc:
            why = exc.strerror or exc
            raise LoraError(f"cannot move the {what} into {out_dir}: {why}") from exc
        done = True
    finally:
        if previous.exists() and not out_dir.exists() and not out_dir.is_symlink():
            os.replace(previous, out_dir)
        shutil.rmtree(scratch, ignore_errors=True)
        if not done:
            _remove_empty_dirs(created)


@dataclass
class ServedCopy:
    """An adapter served from a copy of its directory without added_tokens.json (base_added_tokens): its
    top-level files (SGLang reads no subdirectory: lora_config.py, model_loader's glob of the folder), each a
    real copy. Not a symlink, which follows the training output wherever it moves or is rewritten, and not a
    hard link: PEFT's save_pretrained writes adapter_config.json in place (open "w", same inode), as
    safetensors 0.4.5 does the weights (0.8.0 replaces the file), so a retrain into the same output_dir
    would change, or half-write, what the server loads, without --overwrite."""

    adapter: Adapter
    target: Path
    tokenizer: Path  # whose ids every entry of the left-out file has
    tokens: int  # entries of the left-out file
    files: list[str]
    action: str  # "create" | "replace" | "keep" (the target already is this copy)

    def planned(self) -> dict:
        """as_dict for `lora plan` and `render serve`, which write no copy: `made` (the target already is it)
        in place of the action `lora serve` takes."""
        return {**{k: v for k, v in self.as_dict().items() if k != "action"}, "made": self.action == "keep"}

    def note(self) -> str:
        """What `lora plan` and `render serve` say of the copy they plan: where it is, why, who makes it."""
        made = "made already" if self.action == "keep" else "not made yet: `ktinfra lora serve` makes it"
        return (
            f"{self.adapter.name} is served from {self.target}, a copy of {self.adapter.path} without "
            f"{ADDED_TOKENS_FILE} (sglang-kt refuses an adapter listing added tokens, and its {self.tokens} "
            f"entries have the same ids in {self.tokenizer}), {made}"
        )

    def as_dict(self) -> dict:
        return {
            "adapter": self.adapter.name,
            "source": str(self.adapter.path),
            "output": str(self.target),
            "left_out": ADDED_TOKENS_FILE,
            "tokens": self.tokens,
            "tokenizer": str(self.tokenizer),
            "files": self.files,
            "action": self.action,
        }


def _copied_files(source: Path) -> list[str]:
    """The top-level files of an adapter directory a served copy holds: every one but added_tokens.json."""
    return sorted(p.name for p in source.iterdir() if p.name != ADDED_TOKENS_FILE and p.is_file())


def _copy_difference(source: Path, target: Path, files: list[str]) -> str | None:
    """How `target` differs from the served copy of `source` (None: it is that copy, byte for byte)."""
    held = sorted(p.name for p in target.iterdir())
    if held != files:
        extra, missing = sorted(set(held) - set(files)), sorted(set(files) - set(held))
        return "; ".join(
            f"{label} {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}"
            for label, names in (("it also holds", extra), ("it lacks", missing))
            if names
        )
    changed = [n for n in files if not filecmp.cmp(source / n, target / n, shallow=False)]
    return f"{', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''} differ" if changed else None


def plan_served_copy(
    adapter: Adapter,
    target: Path,
    tokens: tuple[Path, int],
    overwrite: bool,
    remedy: str = "pass --overwrite to replace it",
) -> ServedCopy:
    """What a served copy at `target` takes (base_added_tokens gave `tokens`): created, kept where it is that
    copy already, replaced only with `overwrite` (`remedy` says how, where something else is there). Checked
    before anything is written."""
    check_output_path(adapter, target)
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        what = "a symlink" if target.is_symlink() else "not a directory"
        raise LoraError(f"{target} is {what}: a served adapter copy is a directory; move it away first")
    files = _copied_files(adapter.path)
    action = "create"
    if target.exists():
        difference = _copy_difference(adapter.path, target, files)
        action = "replace" if difference else "keep"
        if difference and not overwrite:
            raise LoraError(
                f"{target} already exists and is not the copy of {adapter.path} without {ADDED_TOKENS_FILE} "
                f"that would be served ({difference}); {remedy}"
            )
    return ServedCopy(adapter, target, tokens[0], tokens[1], files, action)


def make_served_copy(copy: ServedCopy) -> None:
    """Write the served copy (plan_served_copy) into a scratch directory and move it into place; one that is
    already that copy is left as it is."""
    if copy.action == "keep":
        return
    source = copy.adapter.path

    def copy_files(target: Path) -> None:
        try:
            target.mkdir()
            for name in copy.files:
                shutil.copy2(source / name, target / name)
        except OSError as exc:
            raise LoraError(f"cannot copy {source} into {copy.target}: {exc.strerror or exc}") from exc
        served = inspect_adapter(copy.adapter.name, target)  # what was checked is what is served
        check_served_as_is(served)

    _build_into_place(copy.target, copy_files, "served adapter copy")


def convert_all(steps: list, overwrite: bool = False, copies: list[ServedCopy] | None = None) -> list[float]:
    """make_served_copy each of `copies`, then convert() each (adapter, out_dir, cmd_for) in turn; seconds
    each conversion took. When one fails, the outputs (and the directories around them) that this call
    created for the earlier ones are removed again, so a re-run needs no --overwrite. Outputs that existed
    before (--overwrite) are left as made."""
    for adapter, out_dir, cmd_for in steps:  # every target, before the first converter runs
        check_target(adapter, out_dir, cmd_for, overwrite)
    jobs = [(copy.target, lambda copy=copy: make_served_copy(copy), False) for copy in copies or []]
    jobs += [
        (out_dir, lambda a=a, o=out_dir, c=cmd_for: convert(a, o, c, overwrite=overwrite), True)
        for a, out_dir, cmd_for in steps
    ]
    outputs: list[Path] = []  # made here and new
    parents: list[Path] = []  # created around them
    seconds: list[float] = []
    try:
        for out_dir, make, timed in jobs:
            fresh = not out_dir.exists() and not out_dir.is_symlink()
            missing = _missing_dirs(out_dir)
            started = time.perf_counter()
            make()
            if timed:
                seconds.append(round(time.perf_counter() - started, 2))
            parents += missing
            if fresh:
                outputs.append(out_dir)
    except BaseException:
        for out_dir in outputs:
            shutil.rmtree(out_dir, ignore_errors=True)
        _remove_empty_dirs(parents)
        raise
    return seconds


def carries_expert_lora(path: Path) -> bool | None:
    """Whether the adapter directory holds LoRA on the routed experts (KT training output or its merged
    conversion); None when it cannot be read here (the plan may be made away from the adapters)."""
    try:
        if (path / KT_FUSED_FILE).is_file():
            return True
        weights = path / "adapter_model.safetensors"
        if not weights.is_file():
            return None
        return any(_is_expert_lora_key(key) for key in safetensors_header(weights))
    except (OSError, LoraError):
        return None


def _merged_kt_adapter(path: Path) -> bool:
    """Whether adapter_model.safetensors already holds the per-expert LoRA (a converted adapter, which
    sglang-kt serves whatever else lies beside it)."""
    weights = path / "adapter_model.safetensors"
    return weights.is_file() and any(_is_expert_lora_key(key) for key in safetensors_header(weights))


# what `lora plan` and `render serve` say where the folder their served copy goes holds something else
PLANNED_COPY_REMEDY = "`ktinfra lora serve --overwrite` replaces it with that copy"


def check_planned_adapter(
    name: str,
    path: Path,
    legacy: bool = False,
    served_base: str | None = None,
    copy: bool = False,
    output_dir: Path | None = None,
) -> ServedCopy | None:
    """An adapter directory a plan serves as it is, readable here: serve's checks of what SGLang reads
    (inspect_adapter, check_served_as_is: the legacy fork reads adapter_config.json and the tensors as
    sglang-kt does, srt/lora/lora_config.py, lora.py, lora_manager.py init_lora_shapes). One not on this host
    is left alone (the plan may be made away from the adapters). A KT training output is refused: sglang-kt
    needs it converted, and the legacy fork serves no fused expert LoRA at all (check_legacy_adapters).
    With `copy`, an adapter `lora serve` serves from a copy without added_tokens.json (base_added_tokens,
    against `served_base`'s tokenizer as lora serve's --base) passes, and that copy where lora serve puts it
    (output_for: `output_dir` as its --output-dir) is returned, as plan_served_copy checks it; nothing is
    written."""
    fused = (path / KT_FUSED_FILE).is_file()
    if legacy:
        if fused or (path / CONFIG_FILE).is_file():
            adapter = inspect_adapter(name, path)
            check_legacy_adapters([adapter], legacy)
            check_served_as_is(adapter, legacy)
        return None
    if fused and not _merged_kt_adapter(path):
        raise LoraError(
            f"adapter {name}: {path} is a KT training output ({KT_FUSED_FILE}, not converted), which "
            "sglang-kt refuses on --lora-paths at start (server_args.py: 'received raw KT training "
            "adapter'): let `ktinfra lora serve` convert and serve it, or plan the output of kt-kernel's "
            "convert_kt_to_sglang_adapter.py"
        )
    if not (path / CONFIG_FILE).is_file() or fused:
        return None
    adapter = inspect_adapter(name, path)
    tokens = base_added_tokens(adapter, served_base) if copy else None
    check_served_as_is(adapter, served_base=served_base, copied=tokens is not None)
    check_nonexpert_lora(adapter)
    if tokens is None:
        return None
    target = output_for(adapter, legacy, output_dir)
    return plan_served_copy(adapter, target, tokens, overwrite=False, remedy=PLANNED_COPY_REMEDY)


def kt_lora_problems(
    kinds: dict[str, bool | None], kt_method: object, remedy: str, tag: str = ""
) -> list[str]:
    """sglang-kt 0.7.2 serves an adapter with expert LoRA (a merged KT adapter) only alone, and only on a
    kt_method with an SFT backend (server_args.py: "Merged KT composite LoRA cannot be mixed with other
    LoRA adapters"; kt_ep_wrapper.py _map_kt_method_to_sft_method). `kinds`: adapter name -> whether it
    carries expert LoRA (None: unknown); `remedy` says how to serve several."""
    kt = [name for name, kind in kinds.items() if kind]
    problems = []
    if kt and len(kinds) > 1:
        problems.append(
            f"adapter {kt[0]} carries LoRA on the routed experts{tag}, which sglang-kt serves only alone: "
            + remedy
        )
    if kt and isinstance(kt_method, str) and kt_method.upper() not in KT_LORA_METHODS:
        problems.append(
            f"adapter {kt[0]} carries LoRA on the routed experts, which sglang-kt runs on an SFT backend: "
            f"kt_method {kt_method} has none ({', '.join(sorted(KT_LORA_METHODS))} have)"
        )
    return problems


def check_nonexpert_lora(adapter: Adapter) -> None:
    """sglang-kt 0.7.2 splits an adapter carrying expert LoRA into its expert and non-expert tensors at start
    and refuses one with no non-expert tensor on --lora-paths (server_args.py
    _prepare_kt_composite_lora_adapter; it takes such an adapter only as --kt-expert-lora-path, which
    ktinfra does not render): kt-kernel's converter makes one from a KT output without
    adapter_model.safetensors."""
    if adapter.expert_lora and not adapter.nonexpert_tensors:
        raise LoraError(
            f"adapter {adapter.name} has LoRA on the routed experts only ({adapter.path}): sglang-kt "
            "refuses such an adapter on --lora-paths at start (server_args.py: 'contains expert tensors but "
            "no non-expert tensors'; it takes one only as --kt-expert-lora-path, which ktinfra does not "
            "render); train LoRA on the attention too (adapter_model.safetensors beside the fused experts), "
            "or export a merged model (llamafactory-cli export)"
        )


def check_kt_lora_serving(adapters: list[Adapter], kt_method: object, legacy: bool) -> None:
    """kt_lora_problems and check_nonexpert_lora as a LoraError; the legacy stack's sglang fork serves
    converted adapters without these rules."""
    if legacy:
        return
    for adapter in adapters:
        check_nonexpert_lora(adapter)
    names = ", ".join(a.name for a in adapters)
    remedy = f"serve each of {names} from its own instance (--name)"
    problems = kt_lora_problems(
        {a.name: a.expert_lora for a in adapters}, kt_method, remedy, " (a KT adapter)"
    )
    if problems:
        raise LoraError(problems[0])


# srt/lora/utils.py get_normalized_target_modules: the target_modules names SGLang takes for embed_tokens and
# for lm_head (the vocabulary-sized modules, which SGLang wraps outside the decoder layers)
EMBEDDING_TARGETS = frozenset({"embed_tokens", "vocab_emb", "embeddings", "word_embeddings"})
LM_HEAD_TARGETS = frozenset({"lm_head", "output", "unembed_tokens"})
EMBEDDING_LORA_BACKEND = "triton"


def vocab_module(name: str) -> str | None:
    """The vocabulary-sized module ("embed_tokens" or "lm_head") a target_modules entry names, else None."""
    last = name.split(".")[-1]
    return "embed_tokens" if last in EMBEDDING_TARGETS else "lm_head" if last in LM_HEAD_TARGETS else None


def adapter_targets(path: Path) -> object:
    """target_modules of the adapter_config.json in `path`, or None where it cannot be read here."""
    try:
        config = _read_json(path / CONFIG_FILE)
    except (OSError, LoraError):
        return None
    return config.get("target_modules") if isinstance(config, dict) else None


def plan_tp_size(plan: dict) -> int:
    """serve.tensor_parallel_size of a plan, 1 where it is not a whole number (render refuses that)."""
    serve = plan.get("serve") if isinstance(plan.get("serve"), dict) else {}
    tp_size = serve.get("tensor_parallel_size", 1)
    return tp_size if isinstance(tp_size, int) and not isinstance(tp_size, bool) else 1


def check_lora_backend(targets: dict[str, object], backend: str, tp_size: int = 1) -> None:
    """What SGLang (sglang-kt 0.7.2 and the legacy fork) runs of an adapter's embed_tokens / lm_head LoRA;
    `lora serve`, `lora plan` and `render serve` all ask here. `targets`: adapter name -> target_modules
    (None: unknown).

    embed_tokens: its LoRA A is an embedding lookup only the triton backend implements
    (backend/triton_backend.py run_lora_a_embedding); csgmv and torch_native inherit base_backend.py's stub,
    which returns None, and the server fails on its first forward. lm_head: csgmv is refused, as upstream's
    server_args.py says it does not support it (and drops lm_head from --lora-target-modules all). Tensor
    parallel: both layers are written for one GPU (lora/layers.py VocabParallelEmbeddingWithLoRA and
    ParallelLMHeadWithLoRA, "simplified for TP=1"; mem_pool.py "[to-do] support TP"): their LoRA buffers hold
    the whole vocabulary on every rank, and lm_head's LoRA B (N = the whole vocabulary,
    triton_ops/sgemm_lora_b.py) is added into the rank's vocab/tp-wide logits shard."""
    for name, modules in targets.items():
        listed = [m for m in modules if isinstance(m, str)] if isinstance(modules, list) else []
        embedding = next((m for m in listed if vocab_module(m) == "embed_tokens"), None)
        if embedding is not None and backend != EMBEDDING_LORA_BACKEND:
            raise LoraError(
                f"adapter {name} has LoRA on the input embedding ({embedding!r} in target_modules), which "
                f"SGLang's {backend} LoRA backend cannot run: only {EMBEDDING_LORA_BACKEND} implements the "
                "embedding LoRA kernel (srt/lora/backend/triton_backend.py run_lora_a_embedding; the others "
                f"return None there and the server fails on its first forward): pass --lora-backend "
                f"{EMBEDDING_LORA_BACKEND}"
            )
        head = next((m for m in listed if vocab_module(m) == "lm_head"), None)
        if head is not None and backend == "csgmv":
            raise LoraError(
                f"adapter {name} has LoRA on the output head ({head!r} in target_modules), which SGLang's "
                "csgmv LoRA backend does not support (srt/server_args.py: \"LoRA backend 'csgmv' does not "
                'yet support embedding or lm_head layers"; it drops both from --lora-target-modules all): '
                f"pass --lora-backend {EMBEDDING_LORA_BACKEND}"
            )
        vocab = [m for m in listed if vocab_module(m)]
        if vocab and tp_size > 1:
            raise LoraError(
                f"adapter {name} has LoRA on {', '.join(repr(m) for m in vocab)} (target_modules), and the "
                f"plan serves with tensor_parallel_size {tp_size}: SGLang's embed_tokens and lm_head LoRA "
                "layers are written for one GPU (srt/lora/layers.py VocabParallelEmbeddingWithLoRA, "
                "ParallelLMHeadWithLoRA: 'does not support tensor parallelism > 1'; lm_head's LoRA is added "
                "over the whole vocabulary into each GPU's vocab/tp slice of the logits): serve it with "
                "tensor_parallel_size 1, or train it without embed_tokens/lm_head in target_modules"
            )


class PlannedAdapterError(LoraError):
    """A refusal of check_planned_adapters and what it is about (`scope`): "adapter" (the one `adapter`
    names), "set" (the adapters together) or "backend" (their LoRA backend and tensor parallel)."""

    def __init__(self, message: str, scope: str, adapter: str | None = None):
        super().__init__(message)
        self.scope, self.adapter = scope, adapter


def check_planned_adapters(
    paths: dict[str, str] | dict[str, Path],
    backend: str,
    tp_size: int,
    kt_method: object,
    legacy: bool,
    remedy: str,
    kt_rules: bool = True,
    served_base: str | None = None,
    copies: bool = False,
    output_dir: Path | None = None,
) -> dict[str, ServedCopy]:
    """Every check of the adapters a plan serves, for those readable here; `lora plan` calls it, and
    `render serve` and `plan --lora` through check_plan_adapters: check_planned_adapter on each (either
    stack: the directory is what the server loads), kt_lora_problems where `kt_rules` (current stack;
    `remedy` says how to serve several), then check_lora_backend. Refusals are PlannedAdapterErrors. With
    `copies`, the adapters served from a copy without added_tokens.json (check_planned_adapter), by name:
    the caller serves each from its target (in `output_dir`, as lora serve's --output-dir)."""
    planned = {}
    for name, path in paths.items():
        try:
            served_copy = check_planned_adapter(name, Path(path), legacy, served_base, copies, output_dir)
        except LoraError as exc:
            raise PlannedAdapterError(str(exc), "adapter", name) from None
        if served_copy is not None:
            planned[name] = served_copy
    if not legacy and kt_rules:
        kinds = {name: carries_expert_lora(Path(path)) for name, path in paths.items()}
        problems = kt_lora_problems(kinds, kt_method, remedy)
        if problems:
            raise PlannedAdapterError(problems[0], "set")
    targets = {name: adapter_targets(Path(path)) for name, path in paths.items()}
    try:
        check_lora_backend(targets, backend, tp_size)
    except LoraError as exc:
        raise PlannedAdapterError(str(exc), "backend") from None
    return planned


def check_plan_adapters(
    paths: dict[str, str],
    backend: str,
    tp_size: int,
    kt_method: object,
    legacy: bool,
    flag: str = "",
    served_base: str | None = None,
    copies: bool = False,
) -> dict[str, ServedCopy]:
    """check_planned_adapters for a plan's serve.lora.paths, run by `render serve` (a plan made elsewhere or
    edited by hand reaches render without `lora plan`'s checks; `copies`, against `served_base`) and `plan
    --lora` (flag "--lora": messages name the flag, not the plan key; kt_method None: the planner states the
    KT adapter rules as problems itself). Each LoraError names the key or the flag."""
    remedy = f"plan each of {', '.join(paths)} for its own instance"
    kt_rules = kt_method is not None
    try:
        return check_planned_adapters(
            paths, backend, tp_size, kt_method, legacy, remedy, kt_rules, served_base, copies
        )
    except PlannedAdapterError as exc:
        if exc.scope == "adapter":
            where = f"{flag} {exc.adapter}" if flag else f"serve.lora.paths.{exc.adapter}"
        elif exc.scope == "set":
            where = flag or "serve.lora.paths"
        else:
            where = f"{flag or 'serve.lora'} (backend {backend}, tensor_parallel_size {tp_size})"
        raise LoraError(f"{where}: {exc}") from None


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def lora_plan(plan: dict, adapters: dict[str, Path], max_loras: int, backend: str) -> dict:
    """The plan with LoRA on, as sglang-kt 0.7.2 runs KT LoRA: every expert on the CPU (kt_ep_wrapper.py
    refuses GPU experts and the GPU prefill threshold beside expert LoRA) and at least 2 running requests
    (server_args.py); experts moved off the GPU get the planner's deferral for 0 GPU experts. Each value
    changed gets its reason; values of the wrong type are left for render to refuse."""
    if backend not in LORA_BACKENDS:
        raise LoraError(f"--lora-backend must be one of {', '.join(LORA_BACKENDS)}")
    if max_loras < 1:
        raise LoraError("--max-loras-per-batch must be at least 1")
    serve = dict(plan.get("serve") or {})
    reasons = dict(plan.get("reasons") or {}) if isinstance(plan.get("reasons"), dict) else {}
    model = plan.get("model") if isinstance(plan.get("model"), dict) else {}
    per_token, experts = model.get("experts_per_token"), model.get("num_experts")
    if serve.get("kt_num_gpu_experts") not in (0, None):
        reasons["kt_num_gpu_experts"] = "0: an adapter is served, and KT LoRA runs every expert on the CPU"
        if _is_count(per_token) and _is_count(experts):
            deferred, why = deferred_experts(per_token, experts, 0)
            serve["kt_max_deferred_experts_per_token"] = deferred
            reasons["kt_max_deferred_experts_per_token"] = why
    serve["kt_num_gpu_experts"] = 0
    serve["kt_gpu_prefill_token_threshold"] = None
    reasons["kt_gpu_prefill_token_threshold"] = "off: sglang-kt refuses it beside KT LoRA"
    running = serve.get("max_running_requests")
    if _is_count(running) and running < LORA_MIN_RUNNING_REQUESTS:
        serve["max_running_requests"] = LORA_MIN_RUNNING_REQUESTS
        reasons["max_running_requests"] = (
            f"{LORA_MIN_RUNNING_REQUESTS}: raised from {running}, sglang-kt serves LoRA with at least "
            f"{LORA_MIN_RUNNING_REQUESTS}"
        )
    serve["lora"] = {
        "paths": {name: str(path) for name, path in adapters.items()},
        "max_loras_per_batch": max_loras,
        "backend": backend,
    }
    reasons["lora"] = f"{', '.join(adapters)}: at most {max_loras} per batch, {backend} backend"
    return {**plan, "serve": serve, "reasons": reasons}


def served_paths(paths: dict, copies: dict[str, ServedCopy]) -> dict[str, str]:
    """Adapter name -> the directory served: the copy's, for those served from a copy."""
    return {name: str(copies[name].target) if name in copies else path for name, path in paths.items()}


def with_served_copies(plan: dict, copies: dict[str, ServedCopy]) -> dict:
    """A lora_plan whose adapters served from a copy (check_planned_adapters) name that copy in
    serve.lora.paths, the reason for serve.lora saying where it comes from (ServedCopy.note)."""
    if not copies:
        return plan
    lora = {**plan["serve"]["lora"], "paths": served_paths(plan["serve"]["lora"]["paths"], copies)}
    reasons = {**plan["reasons"]}
    reasons["lora"] = "; ".join([reasons["lora"], *(c.note() for c in copies.values())])
    return {**plan, "serve": {**plan["serve"], "lora": lora}, "reasons": reasons}


def _reply_text(data: object) -> str | None:
    """choices[0].message.content of an OpenAI chat completion, or None when the shape is different."""
    choices = data.get("choices") if isinstance(data, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    return content if isinstance(content, str) else "" if content is None else None


def check_endpoint(url: str, timeout_s: float) -> None:
    """--url: an http(s) base URL with a host (bench's check); --timeout: finite, above 0, at most a day."""
    try:
        check_url(url)
        check_not_v1(url, "lora check")
    except ValueError as exc:
        raise LoraError(str(exc)) from None
    if not _is_number(timeout_s) or timeout_s <= 0 or timeout_s > MAX_TIMEOUT_S:
        raise LoraError(
            f"--timeout must be a finite number of seconds above 0 and at most {MAX_TIMEOUT_S:g} (one day), "
            f"not {timeout_s!r}"
        )
    problem = socks_proxy_problem(url)
    if problem:
        raise LoraError(problem)


def check_model_name(model: str) -> None:
    """SGLang (sglang-kt 0.7.2 and the legacy fork alike, entrypoints/openai/serving_base.py
    _parse_model_parameter) takes what follows the first ':' of a request's model as the adapter, before the
    lora_path field, and does not check the name before it: a served name holding a ':' cannot be asked for
    without selecting an adapter (`a:b` asks for adapter b, `a:b` + --adapter x for adapter b:x)."""
    _, colon, rest = model.partition(":")
    if colon:
        raise LoraError(
            f"--model {model!r} holds a ':', and SGLang reads what follows the first ':' of a request's "
            f"model as the adapter name (serving_base.py _parse_model_parameter; here {rest.strip()!r}): "
            "pass a model name without ':' (SGLang does not compare it with the served name) and the "
            "adapter with --adapter"
        )


def _shown(data: object) -> str:
    """The start of a reply for an error message, even for one nested too deeply to serialize."""
    try:
        return json.dumps(data)[:200]
    except (RecursionError, ValueError):
        return f"<{type(data).__name__} nested too deeply to show>"


def chat_check(
    url: str,
    model: str,
    adapter: str | None = None,
    legacy: bool = False,
    prompt: str = "Say hello in one short sentence.",
    max_tokens: int = 32,
    timeout_s: float = 120.0,
    api_key: str | None = None,
) -> dict:
    """One chat request through the endpoint; adapters are chosen as `model:adapter` (current SGLang)
    or with the `lora_path` request field (legacy). A malformed URL or timeout raises LoraError; what the
    server does (no answer, an error, a reply of the wrong shape) is reported in the result."""
    check_endpoint(url, timeout_s)
    check_model_name(model)
    body: dict = {
        "model": f"{model}:{adapter}" if adapter and not legacy else model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
    }
    if adapter and legacy:
        body["lora_path"] = adapter
    t0 = time.perf_counter()
    deadline = t0 + timeout_s
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        # stream=True: headers and body are read under the deadline, the body up to a size (bench's rules)
        with (
            new_session() as session,
            request_deadline(deadline),
            session.post(
                url.rstrip("/") + "/v1/chat/completions",
                json=body,
                headers=headers,
                timeout=timeout_s,
                stream=True,
            ) as resp,
        ):
            status = resp.status_code
            if status != 200:
                return {
                    "ok": False,
                    "request": body,
                    "status": status,
                    "error": error_body(resp, timeout_s, deadline),
                }
            raw = whole_body(resp, timeout_s, deadline)
    except TimedOut:
        return {"ok": False, "request": body, "status": 200, "error": f"timed out after {timeout_s:g} s"}
    except UnexpectedReply as exc:
        return {"ok": False, "request": body, "status": 200, "error": f"unexpected response: {exc}"}
    except (requests.RequestException, OSError) as exc:
        if time.perf_counter() >= deadline:  # the deadline shut the socket while the headers were read
            return {"ok": False, "request": body, "error": f"timed out after {timeout_s:g} s"}
        return {"ok": False, "request": body, "error": f"{type(exc).__name__}: {exc}"}
    elapsed = round(time.perf_counter() - t0, 3)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        problem = _json_problem(exc)
        return {"ok": False, "request": body, "status": 200, "error": f"unexpected response: {problem}"}
    content = _reply_text(data)
    if content is None:
        error = f"unexpected response: {_shown(data)}"
        return {"ok": False, "request": body, "status": 200, "error": error}
    try:
        _, tokens = token_counts(data)  # bench's rules: a count of -5 or NaN is no token count
    except UnexpectedReply as exc:
        return {"ok": False, "request": body, "status": 200, "error": f"unexpected response: {exc}"}
    return {
        "ok": bool(content.strip()),
        "request": body,
        "status": 200,
        "reply": content,
        "completion_tokens": tokens,
        "latency_s": elapsed,
        "error": None if content.strip() else "empty reply",
    }
