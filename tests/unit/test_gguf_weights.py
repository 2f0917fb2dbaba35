"""GGUF quants for LLAMAFILE: every llama.cpp quant kt-kernel reads is a --cpu-format.

Before, the planner knew GGUF:Q4_K_M only (and took Q8_0 for an unknown format).
test_reader_agrees_with_gguf_py checks ktinfra's header reader against gguf-py's GGUFWriter where the `gguf`
package is installed (it is not in the test environment; e.g. PYTHONPATH=/work/main/.devcarry/site, gguf
0.19.0).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktinfra import gguf_files, sizing
from ktinfra.planner import load_facts, plan

REPO = Path(__file__).resolve().parents[2]
NO_AMX = REPO / "tests" / "fixtures" / "facts" / "xeon8352v-4090-noamx.json"


def no_amx() -> dict:
    return load_facts(NO_AMX)


# ---- names and bits --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("Qwen3-30B-A3B-Q8_0.gguf", "Q8_0"),
        ("qwen3-30b-a3b-q4_k_m-00001-of-00002.gguf", "Q4_K_M"),
        ("Meta-Llama-3-8B-Instruct.Q5_K_M.gguf", "Q5_K_M"),
        ("DeepSeek-R1-IQ2_XXS-00003-of-00004.gguf", "IQ2_XXS"),
        ("mmproj-F16.gguf", "F16"),
        ("BF16-model-Q6_K.gguf", "Q6_K"),  # the last one named
        ("DeepSeek-V3-0324-UD-Q2_K_XL-00001-of-00006.gguf", None),  # unsloth's, not a llama.cpp type
        ("Qwen3-30B-A3B.gguf", None),
    ],
)
def test_a_file_name_states_its_quant(name, quant):
    assert gguf_files.quant_in_name(name) == quant


def test_bits_per_weight_come_from_ggml_block_sizes():
    bits = {name: fmt.bytes_per_param * 8 for name, fmt in sizing.GGUF_FORMATS.items()}
    assert bits["GGUF:Q8_0"] == 8.5 and bits["GGUF:Q6_K"] == 6.5625 and bits["GGUF:BF16"] == 16
    assert bits["GGUF:Q4_K_M"] == 4.85  # as before (the layer rule gives 4.84)
    assert bits["GGUF:Q5_K_M"] == 5.68 and bits["GGUF:Q3_K_M"] == 3.81 and bits["GGUF:IQ2_XXS"] == 2.09
    assert bits["GGUF:Q2_K"] == pytest.approx(2.896, abs=1e-3)  # its down projections are Q3_K
    order = ["GGUF:Q8_0", "GGUF:Q6_K", "GGUF:Q5_K_M", "GGUF:Q4_K_M", "GGUF:Q3_K_M", "GGUF:Q2_K", "GGUF:IQ1_S"]
    assert [bits[name] for name in order] == sorted((bits[name] for name in order), reverse=True)


@pytest.mark.parametrize(
    ("spelling", "name"),
    [("GGUF:Q8_0", "GGUF:Q8_0"), ("gguf:q6_k", "GGUF:Q6_K"), ("Q8_0", "GGUF:Q8_0"),
     ("gguf-iq2-xxs", "GGUF:IQ2_XXS"), ("GGUF_Q4_K_M", "GGUF:Q4_K_M"), ("llamafile", "GGUF:Q4_K_M"),
     ("GGUF", "GGUF:Q4_K_M"), ("BF16", "BF16")],
)  # fmt: skip
def test_cpu_format_takes_every_gguf_quant(spelling, name):
    fmt = sizing.cpu_format(spelling)
    assert fmt.name == name and (fmt.kt_method == "LLAMAFILE") == name.startswith("GGUF:")


@pytest.mark.parametrize(
    ("spelling", "message"),
    [
        ("GGUF:TQ1_0", "a llama.cpp quant not offered"),
        ("GGUF:Q7_0", "unknown GGUF quant"),
        ("Q7_0", "unknown CPU"),
    ],
)
def test_a_quant_llamafile_cannot_serve_is_named(spelling, message):
    with pytest.raises(ValueError, match=message):
        sizing.cpu_format(spelling)


def test_the_table_and_the_default_gguf_plan_are_unchanged():
    """`ktinfra models` (and seed 000's table) still show one GGUF row, Q4_K_M at 4.85 bits; a host without
    AMX is still planned on it when no weight directory says otherwise."""
    assert list(sizing.CPU_FORMATS) == ["AMXINT8", "AMXINT4", "BF16", "FP8", "RAWINT4", "GGUF:Q4_K_M"]
    from ktinfra import catalog

    arch = catalog.resolve("Qwen3-30B-A3B")
    rows = [row for row in sizing.table(arch) if "GGUF" in row]
    assert rows == ["serve:GGUF:Q4_K_M"]
    result = plan(no_amx(), "Qwen3-30B-A3B", "serve")
    assert result["serve"]["kt_weight_format"] == "gguf:Q4_K_M"
    experts = arch.routed_expert_params * 4.85 / 8
    assert result["requirements_breakdown"]["cpu_experts"] == int(experts)


# ---- the reader against gguf-py ------------------------------------------------------------------------
def test_reader_agrees_with_gguf_py(tmp_path):
    """ktinfra reads headers itself (no numpy, no gguf dependency); it must agree with the reference."""
    gguf = pytest.importorskip("gguf")
    import numpy as np

    assert {t: (b, s) for t, (_, b, s) in gguf_files.GGML_TYPES.items()} == {
        int(t): size for t, size in gguf.GGML_QUANT_SIZES.items() if int(t) in gguf_files.GGML_TYPES
    }
    assert all(gguf.LlamaFileType(i).name.endswith(n) for i, n in gguf_files.LLAMA_FILE_TYPES.items())
    path = tmp_path / "Tiny-Q8_0.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_array("tokenizer.ggml.tokens", ["a", "bb", "ccc"] * 500)
    writer.add_array("tokenizer.ggml.scores", [0.5] * 99)
    writer.add_string("tokenizer.chat_template", "{{ messages }}" * 300)
    q8 = gguf.quants.quantize(np.random.rand(4, 64, 256).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("blk.0.ffn_gate_exps.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    q6 = np.zeros((4, 64, 210), dtype=np.uint8)
    writer.add_tensor("blk.0.ffn_down_exps.weight", q6, raw_dtype=gguf.GGMLQuantizationType.Q6_K)
    writer.add_tensor("token_embd.weight", np.zeros((10, 256), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    mine, theirs = gguf_files.read_header(path), gguf.GGUFReader(str(path))
    assert mine.file_type == "Q8_0" and mine.data_end == mine.file_bytes
    assert [
        (t.name, t.type_name, t.elements, mine.data_start + t.offset, t.nbytes) for t in mine.tensors
    ] == [
        (t.name, t.tensor_type.name, int(t.n_elements), int(t.data_offset), int(t.n_bytes))
        for t in theirs.tensors
    ]
