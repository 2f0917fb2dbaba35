"""A GGUF whose MoE layers kt-kernel's LLAMAFILE backend cannot load is refused by the plan, not warned about.

kt-kernel (kt_kernel/utils/llamafile.py, load_weights) takes blk.N.ffn_gate_exps, ffn_up_exps and
ffn_down_exps of every MoE layer by name and raises KeyError for one that is not there. Before, a GGUF whose
gate and up experts are fused into one blk.N.ffn_gate_up_exps tensor (gguf-py 0.19 writes that name for
Qwen3-Next, Qwen3.5-MoE, Gemma 4 and Mistral 4 checkpoints storing experts.gate_up_proj), a layer missing one
of the three, or a GGUF of fewer MoE layers than the model's, was planned (sized from the tensors it had) with
at most a warning, and the server failed at load.

The files are written by gguf-py's own GGUFWriter: real headers and tensor tables, the data left as a hole.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from ktinfra import catalog
from ktinfra.planner import PlanInputError, load_facts, plan

REPO = Path(__file__).resolve().parents[2]
NO_AMX = REPO / "tests" / "fixtures" / "facts" / "xeon8352v-4090-noamx.json"
Q8 = gguf.GGMLQuantizationType.Q8_0
HIDDEN, WIDTH, EXPERTS, LAYERS = 2048, 768, 128, 48  # Qwen3-30B-A3B, the catalog's


def q8_nbytes(shape: tuple[int, ...]) -> int:
    block, size = gguf.GGML_QUANT_SIZES[Q8]
    return int(np.prod(shape)) // block * size


def write_gguf(path: Path, tensors: list[tuple[str, tuple[int, ...]]]) -> None:
    """A Q8_0 GGUF holding `tensors` (name, numpy-order shape), written by GGUFWriter; data is a hole."""
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    for name, shape in tensors:
        writer.add_tensor_info(name, shape, np.dtype(np.float32), q8_nbytes(shape), raw_dtype=Q8)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    align = writer.data_alignment
    data_start = -(-path.stat().st_size // align) * align  # the tensor table, padded to the alignment
    total = 0
    for _, shape in tensors:
        total += -(-q8_nbytes(shape) // align) * align
    with open(path, "r+b") as handle:
        handle.truncate(data_start + total)
    assert len(gguf.GGUFReader(str(path)).tensors) == len(tensors)  # the reference reader takes it


def layer(index: int, parts=("gate", "up", "down")) -> list[tuple[str, tuple[int, ...]]]:
    shapes = {
        "gate": (EXPERTS, WIDTH, HIDDEN),
        "up": (EXPERTS, WIDTH, HIDDEN),
        "down": (EXPERTS, HIDDEN, WIDTH),
        "gate_up": (EXPERTS, 2 * WIDTH, HIDDEN),
    }
    return [(f"blk.{index}.ffn_{part}_exps.weight", shapes[part]) for part in parts]


def serve(weight_path: Path) -> dict:
    return plan(load_facts(NO_AMX), "Qwen3-30B-A3B", "serve", weight_path=str(weight_path))


def test_the_catalog_model_is_what_these_files_are_made_for():
    arch = catalog.resolve("Qwen3-30B-A3B")
    assert (arch.hidden_size, arch.moe_intermediate_size, arch.num_experts) == (HIDDEN, WIDTH, EXPERTS)
    assert (arch.num_layers, arch.num_moe_layers) == (LAYERS, LAYERS)


def test_a_whole_gguf_is_planned_without_a_warning(tmp_path):
    write_gguf(tmp_path / "Qwen3-30B-A3B-Q8_0.gguf", [t for i in range(LAYERS) for t in layer(i)])
    result = serve(tmp_path)
    assert result["serve"]["kt_weight_format"] == "gguf:Q8_0"
    assert not any("another model" in w for w in result["warnings"]), result["warnings"]


def test_fused_gate_up_experts_are_refused(tmp_path):
    fused = [t for i in range(LAYERS) for t in layer(i, ("gate_up", "down"))]
    write_gguf(tmp_path / "Qwen3-30B-A3B-Q8_0.gguf", fused)
    with pytest.raises(PlanInputError, match=r"blk\.0\.ffn_gate_up_exps\.weight \(and 47 more layers\)"):
        serve(tmp_path)


@pytest.mark.parametrize("missing", ["gate", "up", "down"])
def test_a_layer_missing_one_of_its_expert_tensors_is_refused(tmp_path, missing):
    tensors = [t for i in range(LAYERS) for t in layer(i)]
    tensors.remove(layer(7, (missing,))[0])
    write_gguf(tmp_path / "Qwen3-30B-A3B-Q8_0.gguf", tensors)
    with pytest.raises(PlanInputError, match=rf"layer 7 lacks blk\.7\.ffn_{missing}_exps\.weight"):
        serve(tmp_path)


def test_a_layer_split_over_two_parts_is_whole(tmp_path):
    """kt-kernel takes each tensor from whichever file holds it: layer 23's gate in part 1, its up and down
    in part 2."""
    tensors = [t for i in range(LAYERS) for t in layer(i)]
    cut = tensors.index(layer(23, ("up",))[0])
    write_gguf(tmp_path / "Qwen3-30B-A3B-Q8_0-00001-of-00002.gguf", tensors[:cut])
    write_gguf(tmp_path / "Qwen3-30B-A3B-Q8_0-00002-of-00002.gguf", tensors[cut:])
    assert serve(tmp_path)["serve"]["kt_weight_format"] == "gguf:Q8_0"


def test_a_gguf_of_fewer_moe_layers_than_the_model_is_refused(tmp_path):
    write_gguf(tmp_path / "Qwen3-30B-A3B-Q8_0.gguf", [t for i in range(24) for t in layer(i)])
    expected = r"experts of 24 layers \(0-23\), Qwen3-30B-A3B has 48 MoE layers"
    with pytest.raises(PlanInputError, match=expected):
        serve(tmp_path)
