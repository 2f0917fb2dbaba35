"""--weight-path at a directory of GGUF files: the quant it holds decides the format, its headers the RAM."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from ktinfra import gguf_files, sizing
from ktinfra.architecture import Architecture
from ktinfra.plan.host import gb

EXPERT_TENSORS = "blk.N.ffn_{gate,up,down}_exps.weight"


@dataclass(frozen=True)
class HeldGguf:
    """The GGUF model a weight directory holds, as kt-kernel's LLAMAFILE backend would load it."""

    path: str
    fmt: sizing.CpuFormat
    source: str  # where the quant was read: "general.file_type of X.gguf", "the file name X.gguf", ...
    models: tuple[gguf_files.GgufModel, ...]
    others: tuple[str, ...]  # .gguf files without expert tensors (kt-kernel maps them, loads nothing)
    file_bytes: int
    given: str | None = None  # the --weight-path given, where `path` is its one folder of .gguf files

    @property
    def files(self) -> list[str]:
        return [name for model in self.models for name in model.files]

    def expert_tensors(self, arch: Architecture) -> list[gguf_files.Tensor]:
        """What kt-kernel loads for `arch`: the expert tensors of its layers (not those of an MTP layer)."""
        return [t for model in self.models for t in model.expert_tensors(arch.num_layers)]

    def expert_bytes(self, arch: Architecture) -> int:
        return sum(t.nbytes for t in self.expert_tensors(arch))

    def reason(self) -> str:
        where = f"{self.given}'s one folder of .gguf files, {self.path}," if self.given else self.path
        return f"LLAMAFILE: --weight-path {where} holds GGUF {self.quant} experts ({self.source})"

    @property
    def quant(self) -> str:
        return self.fmt.name.removeprefix("GGUF:")

    def warnings(self, arch: Architecture) -> list[str]:
        """The GGUF's experts against the model's: another model's GGUF would fail at load. One of fewer MoE
        layers than the model's is refused (GgufError): kt-kernel's LLAMAFILE backend loads the expert
        tensors of every MoE layer by name (kt_kernel/utils/llamafile.py) and fails (KeyError) on a layer the
        files do not hold."""
        layers = sorted({t.layer for t in self.expert_tensors(arch)})
        if len(layers) < arch.num_moe_layers:
            raise gguf_files.GgufError(
                f"--weight-path {self.path}: its GGUF holds the experts of {len(layers)} layers "
                f"({_layer_ranges(layers)}), {arch.name} has {arch.num_moe_layers} MoE layers: kt-kernel's "
                f"LLAMAFILE backend loads the {EXPERT_TENSORS} tensors of every one and fails (KeyError) on "
                "the first it lacks. Is it the GGUF of another model?"
            )
        held = sum(t.elements for t in self.expert_tensors(arch))
        if held == arch.routed_expert_params:
            return []
        return [
            f"--weight-path {self.path}: its GGUF expert tensors hold {held / 1e9:.2f}B weights, "
            f"{arch.name} has {arch.routed_expert_params / 1e9:.2f}B routed-expert weights: is it the GGUF "
            "of another model? kt-kernel loads them by layer and would fail (or serve the wrong experts)"
        ]

    def files_reason(self, arch: Architecture) -> str:
        files = self.files
        shown = files[0] if len(files) == 1 else f"{len(files)} files, {files[0]} ..."
        extra = f"; {', '.join(self.others)} hold no experts" if self.others else ""
        return (
            f"{self.fmt.weight_format}: {gb(self.expert_bytes(arch))} of experts in RAM, the "
            f"{EXPERT_TENSORS} tensors kt-kernel copies out of {shown} ({gb(self.file_bytes)} of .gguf files "
            f"in all; SGLang takes the other weights from the checkpoint){extra}"
        )


def _layer_ranges(layers: list[int]) -> str:
    """0-23 for a run of layers, else the first few."""
    if layers and layers == list(range(layers[0], layers[-1] + 1)):
        return f"{layers[0]}-{layers[-1]}" if len(layers) > 1 else str(layers[0])
    return ", ".join(map(str, layers[:8])) + (" ..." if len(layers) > 8 else "")


def _listing(models: list[gguf_files.GgufModel]) -> str:
    by_quant: dict[str, list[str]] = {}
    for model in models:
        by_quant.setdefault(model.quant or "quant not stated", []).append(model.name)
    return "; ".join(f"{quant}: {', '.join(names)}" for quant, names in by_quant.items())


def _one_model(path: str, models: list[gguf_files.GgufModel]) -> None:
    """kt-kernel merges the tensors of every .gguf file in the directory, a later file's over an earlier
    one's: files of several quants, or two copies of the same experts, cannot be served as they are."""
    quants = sorted({m.quant for m in models if m.quant})
    if len(quants) > 1:
        raise gguf_files.GgufError(
            f"--weight-path {path} holds GGUF files of {len(quants)} quants ({_listing(models)}): kt-kernel "
            "loads every .gguf file in the directory, each one's experts over the others'. Which quant is to "
            "be served? Keep its files alone in a directory and point --weight-path there"
        )
    seen: dict[str, str] = {}
    for header in (header for model in models for header in model.headers):
        for tensor in header.tensors:
            if not tensor.routed_experts:
                continue
            if tensor.name in seen:
                raise gguf_files.GgufError(
                    f"--weight-path {path} holds {tensor.name} twice ({seen[tensor.name]} and "
                    f"{header.path.name}): two copies of the same experts (two GGUF models, or a split part "
                    "copied under another number), which kt-kernel would load one over the other; keep one"
                )
            seen[tensor.name] = header.path.name


def _quant(path: str, models: list[gguf_files.GgufModel], requested: str | None) -> tuple[str, str]:
    """(quant, where it was read), checked against a quant --cpu-format names."""
    stated = next((m for m in models if m.quant), None)
    named = sizing.gguf_quant_named(requested) if requested else None
    if stated is None:
        if named is None:
            raise gguf_files.GgufError(
                f"--weight-path {path}: {', '.join(m.name for m in models)} state no llama.cpp quant (no "
                "general.file_type, none in the file name); name it: --cpu-format GGUF:<TYPE>"
            )
        return named, f"as --cpu-format {requested} says; the files state none"
    where = (
        f"general.file_type of {stated.name}"
        if stated.quant_source == "general.file_type"
        else f"the file name {stated.name}"
    )
    if named is not None and named != stated.quant:
        raise gguf_files.GgufError(
            f"--cpu-format {requested} names {named}, but --weight-path {path} holds {stated.quant} "
            f"({where}): plan with --cpu-format GGUF:{stated.quant} (or leave it out), or point "
            f"--weight-path at the {named} files"
        )
    return stated.quant, where


def held_gguf(path: str, requested: str | None) -> HeldGguf | None:
    """The GGUF model directly in --weight-path `path` (None where it holds no .gguf file), in the format its
    quant names, reconciled with --cpu-format `requested`; GgufError where the two disagree or the
    directory cannot be served as it is."""
    fmt = sizing.cpu_format(requested) if requested else None
    try:
        directory = gguf_files.read_dir(Path(path))
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename and str(exc.filename) != path else ""  # the file, if one
        raise gguf_files.GgufError(f"--weight-path {path}: {where}{exc.strerror or exc}") from exc
    if directory is None:
        if fmt is not None and not fmt.gguf:
            return None
        if fmt is not None and os.path.exists(path) and not os.path.isdir(path):  # GGUFLoader: ValueError
            raise gguf_files.GgufError(
                f"--weight-path {path} is a file, not a .gguf file nor a directory: kt-kernel's GGUF loader "
                "(LLAMAFILE) reads only those"
            )
        inside = gguf_files.gguf_subdirs(Path(path))
        # a repo keeping each quant in a folder, one of them downloaded: kt-kernel is to read that folder
        if len(inside) == 1:
            held = held_gguf(str(Path(path) / inside[0]), requested)
            return dataclasses.replace(held, given=path) if held else None
        if fmt is not None or inside:  # no format named: GGUF folders inside still say what it holds
            _no_gguf(path, fmt, inside)
        return None  # not there yet, or empty: the download will put the files there
    quants = ", ".join(q or "quant not stated" for q in directory.quants) or "no experts"
    if fmt is not None and not fmt.gguf:
        raise gguf_files.GgufError(
            f"--weight-path {path} holds GGUF files ({quants}), which only LLAMAFILE reads: --cpu-format "
            f"{fmt.name} would read convert_cpu_weights.py output or the checkpoint; leave --cpu-format out "
            "or give GGUF:<TYPE>"
        )
    models = directory.models
    if not models:
        raise gguf_files.GgufError(
            f"--weight-path {path}: its .gguf files ({', '.join(directory.others)}) hold no {EXPERT_TENSORS} "
            "tensors, the routed experts LLAMAFILE loads"
        )
    _one_model(path, models)
    gguf_files.check_expert_layers([header for model in models for header in model.headers])
    quant, source = _quant(path, models, requested)
    # the tensors first: a file whose experts were given other types (--tensor-type, unsloth's UD quants) is
    # judged by what it holds, not by the file type
    if why := gguf_files.llamafile_failure({t.type_name for m in models for t in m.expert_tensors()}):
        raise gguf_files.GgufError(f"--weight-path {path} ({quant}, {source}) holds {why}")
    held_format = sizing.GGUF_FORMATS.get(f"GGUF:{quant}")
    if held_format is None:
        raise gguf_files.GgufError(
            f"--weight-path {path} holds {quant} ({source}), which LLAMAFILE does not serve"
        )
    return HeldGguf(path, held_format, source, tuple(models), tuple(directory.others), directory.file_bytes)


def _no_gguf(path: str, fmt: sizing.CpuFormat | None, inside: list[str]) -> None:
    """A --weight-path that exists but holds no .gguf file itself (nor in one folder only), with a GGUF
    --cpu-format or none (`inside` is then not empty)."""
    if inside:
        raise gguf_files.GgufError(
            f"--weight-path {path} holds no .gguf file itself, its folders {', '.join(inside)} do: kt-kernel "
            f"reads only the .gguf files directly in --kt-weight-path; point --weight-path at the one to "
            f"serve, e.g. {path.rstrip('/')}/{inside[0]}"
        )
    try:
        present = any(Path(path).iterdir())
    except OSError:
        present = False
    if present:
        raise gguf_files.GgufError(
            f"--weight-path {path} holds no .gguf file for --cpu-format {fmt.name} (LLAMAFILE reads the "
            ".gguf files directly in it)"
        )
