"""GGUF quants for LLAMAFILE: every llama.cpp quant kt-kernel reads is a --cpu-format, and --weight-path at a
directory of .gguf files plans the quant it holds, with its RAM from the files' own tensor tables.

Before, the planner knew GGUF:Q4_K_M only: a directory of Q8_0 files was planned (and its RAM sized) as
Q4_K_M, 1.75x too little, and --weight-path without --cpu-format was refused. The fake models are written
by gguf_fixture.py with struct (header and tensor table, data left as a hole: a 31 GB model costs a few kB);
test_reader_agrees_with_gguf_py checks the reader against gguf-py's own GGUFWriter (a dev dependency).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gguf_fixture as fixture
import pytest

from ktinfra import gguf_files, sizing
from ktinfra.planner import PlanInputError, load_facts, plan

REPO = Path(__file__).resolve().parents[2]
NO_AMX = REPO / "tests" / "fixtures" / "facts" / "xeon8352v-4090-noamx.json"
GB = 1e9


def no_amx() -> dict:
    return load_facts(NO_AMX)


def serve(weight_path: Path, cpu_format: str | None = None, model: str = "Qwen3-30B-A3B") -> dict:
    return plan(no_amx(), model, "serve", weight_path=str(weight_path), cpu_format=cpu_format)


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
    assert bits["GGUF:Q5_K_M"] == 5.68 and bits["GGUF:Q3_K_M"] == 3.81
    assert gguf_files.expert_bits_per_weight("IQ2_XXS") == pytest.approx(2.09, abs=5e-3)  # sized, not offered
    assert bits["GGUF:Q2_K"] == pytest.approx(2.896, abs=1e-3)  # its down projections are Q3_K
    order = ["GGUF:Q8_0", "GGUF:Q6_K", "GGUF:Q5_K_M", "GGUF:Q4_K_M", "GGUF:Q3_K_M", "GGUF:Q2_K", "GGUF:IQ1_S"]
    assert [bits[name] for name in order] == sorted((bits[name] for name in order), reverse=True)


@pytest.mark.parametrize(
    ("spelling", "name"),
    [("GGUF:Q8_0", "GGUF:Q8_0"), ("gguf:q6_k", "GGUF:Q6_K"), ("Q8_0", "GGUF:Q8_0"),
     ("gguf-iq1-s", "GGUF:IQ1_S"), ("GGUF_Q4_K_M", "GGUF:Q4_K_M"), ("llamafile", "GGUF:Q4_K_M"),
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


# ---- a weight directory ----------------------------------------------------------------------------------
def test_a_q8_0_directory_is_planned_as_q8_0_and_sized_from_its_bytes(tmp_path):
    experts = fixture.qwen3_30b(tmp_path / "q8", "Q8_0")
    result = serve(tmp_path / "q8")  # no --cpu-format: the directory says
    assert result["feasible"], result["problems"]
    assert (result["serve"]["kt_method"], result["serve"]["kt_weight_format"]) == ("LLAMAFILE", "gguf:Q8_0")
    assert result["requirements_breakdown"]["cpu_experts"] == experts  # 30.8 GB, not Q4_K_M's 17.6
    assert result["requirements"]["ram_bytes"] == experts + sizing.HOST_RUNTIME_RAM
    assert experts / GB == pytest.approx(30.8, abs=0.05)
    assert "general.file_type of Qwen3-30B-A3B-Q8_0.gguf" in result["reasons"]["kt_method"]
    assert "30.8 GB of experts in RAM" in result["reasons"]["kt_weight_format"]
    assert result["requirements_breakdown"]["cpu_weights_on_disk"] == 0  # there already
    assert "not counted again" in result["reasons"]["kt_weight_path"]
    assert result["warnings"] == [] and result["serve"]["kt_weight_path"] == str(tmp_path / "q8")
    # the same directory with its quant named (or the backend alone) plans the same
    for named in ("GGUF:Q8_0", "GGUF", "LLAMAFILE"):
        assert serve(tmp_path / "q8", named)["requirements"] == result["requirements"]


def test_a_mixed_k_quant_is_sized_from_its_tensors_not_its_average(tmp_path):
    """Q4_K_M here puts every other down projection in Q6_K; the RAM is what the tensor table says."""
    experts = fixture.qwen3_30b(tmp_path / "q4", "Q4_K_M")
    result = serve(tmp_path / "q4", "GGUF:Q4_K_M")
    assert result["serve"]["kt_weight_format"] == "gguf:Q4_K_M"
    assert result["requirements_breakdown"]["cpu_experts"] == experts


def test_split_files_are_summed(tmp_path):
    whole = fixture.qwen3_30b(tmp_path / "one", "Q8_0")
    fixture.qwen3_30b(tmp_path / "three", "Q8_0", parts=3)
    result = serve(tmp_path / "three")
    assert result["serve"]["kt_weight_format"] == "gguf:Q8_0"  # from the first part's header
    assert result["requirements_breakdown"]["cpu_experts"] == whole
    assert "3 files, Qwen3-30B-A3B-Q8_0-00001-of-00003.gguf" in result["reasons"]["kt_weight_format"]


def test_a_split_set_missing_a_part_is_refused(tmp_path):
    fixture.qwen3_30b(tmp_path, "Q8_0", parts=3)
    (tmp_path / "Qwen3-30B-A3B-Q8_0-00002-of-00003.gguf").unlink()
    with pytest.raises(PlanInputError, match=r"lacks Qwen3-30B-A3B-Q8_0-00002-of-00003.gguf \(2 of 3 parts"):
        serve(tmp_path)


def test_a_split_part_numbered_outside_its_set_is_refused(tmp_path):
    """Before: a part 00004-of-00003 (a renamed or stray file) was left out of the sizing, though kt-kernel
    loads every .gguf file in the directory."""
    fixture.qwen3_30b(tmp_path, "Q8_0", parts=3)
    part = tmp_path / "Qwen3-30B-A3B-Q8_0-00003-of-00003.gguf"
    os.link(part, tmp_path / "Qwen3-30B-A3B-Q8_0-00004-of-00003.gguf")  # the data is a hole: no copy
    with pytest.raises(PlanInputError, match=r"Q8_0-00004-of-00003.gguf: part 4 of a set of 3 split parts"):
        serve(tmp_path)


def test_several_quants_in_one_directory_are_refused(tmp_path):
    """kt-kernel would load both files, the later one's experts over the earlier one's: ask which."""
    fixture.qwen3_30b(tmp_path, "Q8_0")
    fixture.qwen3_30b(tmp_path, "Q4_K_M", parts=2)
    with pytest.raises(PlanInputError) as refused:
        serve(tmp_path)
    message = str(refused.value)
    assert "holds GGUF files of 2 quants" in message and "Which quant is to be served?" in message
    assert "Q4_K_M: Qwen3-30B-A3B-Q4_K_M-00001-of-00002.gguf; Q8_0: Qwen3-30B-A3B-Q8_0.gguf" in message


def test_two_copies_of_the_same_experts_are_refused(tmp_path):
    fixture.qwen3_30b(tmp_path, "Q8_0")
    fixture.qwen3_30b(tmp_path, "Q8_0", name="copy-of-it")
    with pytest.raises(PlanInputError, match="holds blk.0.ffn_gate_exps.weight twice"):
        serve(tmp_path)


@pytest.mark.parametrize(
    ("cpu_format", "message"),
    [
        ("GGUF:Q4_K_M", "--cpu-format GGUF:Q4_K_M names Q4_K_M, but --weight-path {} holds Q8_0"),
        ("Q6_K", "--cpu-format Q6_K names Q6_K, but --weight-path {} holds Q8_0"),
        ("AMXINT8", "--weight-path {} holds GGUF files (Q8_0), which only LLAMAFILE reads"),
        ("BF16", "--cpu-format BF16 would read convert_cpu_weights.py output or the checkpoint"),
    ],
)
def test_a_cpu_format_the_directory_contradicts_is_refused(tmp_path, cpu_format, message):
    fixture.qwen3_30b(tmp_path, "Q8_0")
    with pytest.raises(
        PlanInputError, match=message.format(tmp_path).replace("(", r"\(").replace(")", r"\)")
    ):
        serve(tmp_path, cpu_format)


def test_a_header_without_file_type_falls_back_to_the_name(tmp_path):
    """Quantizers that write no general.file_type: the file name's Q6_K is the quant."""
    experts = fixture.qwen3_30b(tmp_path, "Q6_K", file_type=False)
    result = serve(tmp_path)
    assert result["serve"]["kt_weight_format"] == "gguf:Q6_K"
    assert "the file name Qwen3-30B-A3B-Q6_K.gguf" in result["reasons"]["kt_method"]
    assert result["requirements_breakdown"]["cpu_experts"] == experts


def test_an_f32_gguf_is_planned(tmp_path):
    """kt-kernel 0.7.2 loaded F32 experts on the H100 host (docs/results/2026-11-24-h100-recheck-session16);
    before, GGUF:F32 was "not offered for LLAMAFILE" and a directory of F32 files was refused."""
    experts = fixture.qwen3_30b(tmp_path, "F32")
    planned = serve(tmp_path)
    assert planned["serve"]["kt_weight_format"] == "gguf:F32"
    assert planned["requirements_breakdown"]["cpu_experts"] == experts
    assert sizing.cpu_format("GGUF:F32").bytes_per_param == 4


def test_a_quant_stated_nowhere_is_asked_for(tmp_path):
    experts = fixture.qwen3_30b(tmp_path, "Q8_0", name="Qwen3-30B-A3B-custom", file_type=False)
    with pytest.raises(PlanInputError, match="state no llama.cpp quant .*--cpu-format GGUF:<TYPE>"):
        serve(tmp_path)
    named = serve(tmp_path, "GGUF:Q8_0")
    assert named["serve"]["kt_weight_format"] == "gguf:Q8_0"
    assert named["requirements_breakdown"]["cpu_experts"] == experts


def test_the_one_quant_folder_is_planned(tmp_path):
    """unsloth's big GGUF repos keep each quant in a folder, and a store fetches one of them (allow_patterns);
    kt-kernel reads only the .gguf files directly in the folder it is given, so the plan names that folder.
    Before: the plan stopped and asked for the folder."""
    experts = fixture.qwen3_30b(tmp_path / "Q8_0", "Q8_0")
    (tmp_path / "README.md").write_text("x")
    planned = serve(tmp_path, "GGUF")
    assert planned["serve"]["kt_weight_path"] == str(tmp_path / "Q8_0")
    assert planned["serve"]["kt_weight_format"] == "gguf:Q8_0"
    assert planned["requirements_breakdown"]["cpu_experts"] == experts
    assert f"the one folder of .gguf files in {tmp_path}" in planned["reasons"]["kt_weight_path"]
    assert f"{tmp_path}'s one folder of .gguf files, {tmp_path / 'Q8_0'}," in planned["reasons"]["kt_method"]


def test_several_quant_folders_are_pointed_at(tmp_path):
    fixture.qwen3_30b(tmp_path / "Q8_0", "Q8_0")
    fixture.qwen3_30b(tmp_path / "Q4_K_M", "Q4_K_M")
    message = (
        f"its folders Q4_K_M, Q8_0 do: .* point --weight-path at the one to serve, e.g. {tmp_path}/Q4_K_M"
    )
    with pytest.raises(PlanInputError, match=message):
        serve(tmp_path, "GGUF:Q8_0")


def test_a_gguf_format_on_a_directory_of_other_weights_is_refused(tmp_path):
    (tmp_path / "_layer_0").mkdir()
    with pytest.raises(PlanInputError, match="holds no .gguf file for --cpu-format GGUF:Q8_0"):
        serve(tmp_path, "GGUF:Q8_0")


def test_a_directory_not_there_yet_is_planned_from_the_bits_per_weight(tmp_path):
    result = serve(tmp_path / "later", "GGUF:Q8_0")
    arch_experts = result["model"]["total_params"]  # the whole-model GGUF download goes there
    assert result["requirements_breakdown"]["cpu_weights_on_disk"] == int(arch_experts * 8.5 / 8)
    assert "the GGUF download puts" in result["reasons"]["kt_weight_path"]


@pytest.mark.parametrize("cpu_format", [None, "GGUF:Q8_0"])
def test_a_gguf_file_as_weight_path_is_planned_on_that_file(tmp_path, cpu_format):
    """kt-kernel 0.7.2's GGUFLoader reads a single .gguf file as well as a directory (utils/loader.py:838).
    Before (this session): such a --weight-path was refused; before that, planned as a folder the download
    had still to fill ("the GGUF download puts 32.4 GB ... there")."""
    experts = fixture.qwen3_30b(tmp_path, "Q8_0")
    file = tmp_path / "Qwen3-30B-A3B-Q8_0.gguf"
    planned = serve(file, cpu_format)
    assert (planned["serve"]["kt_weight_path"], planned["serve"]["kt_weight_format"]) == (
        str(file),
        "gguf:Q8_0",
    )
    assert planned["requirements_breakdown"]["cpu_experts"] == experts
    assert "not counted again" in planned["reasons"]["kt_weight_path"]


def test_one_part_of_a_split_set_as_weight_path_is_refused(tmp_path):
    """Given one part, kt-kernel loads that file alone: the other parts' experts would be missing."""
    fixture.qwen3_30b(tmp_path, "Q8_0", parts=3)
    with pytest.raises(PlanInputError, match=r"lacks Qwen3-30B-A3B-Q8_0-00002-of-00003.gguf"):
        serve(tmp_path / "Qwen3-30B-A3B-Q8_0-00001-of-00003.gguf")


@pytest.mark.parametrize("damage", ["truncated", "not gguf", "big-endian"])
def test_a_damaged_file_is_refused(tmp_path, damage):
    fixture.qwen3_30b(tmp_path, "Q8_0")
    file = tmp_path / "Qwen3-30B-A3B-Q8_0.gguf"
    if damage == "truncated":
        with open(file, "r+b") as handle:
            handle.truncate(file.stat().st_size - 1)
        message = "an unfinished download"
    elif damage == "not gguf":
        file.write_bytes(b"<html>rate limited</html>")
        message = "not a GGUF file"
    else:
        with open(file, "r+b") as handle:
            handle.seek(4)
            handle.write((3).to_bytes(4, "big"))  # the version as a big-endian file writes it
        message = "big-endian"
    with pytest.raises(PlanInputError, match=message):
        serve(tmp_path)


def test_a_file_without_experts_beside_the_model_is_left_out(tmp_path):
    """A vision projector (mmproj-F16.gguf) holds no experts: it neither sets the quant nor the RAM."""
    experts = fixture.qwen3_30b(tmp_path, "Q8_0")
    fixture.write(tmp_path / "mmproj-F16.gguf", [("v.patch_embd.weight", "F16", (14, 14, 3, 1024))], {})
    result = serve(tmp_path)
    assert result["serve"]["kt_weight_format"] == "gguf:Q8_0"
    assert result["requirements_breakdown"]["cpu_experts"] == experts
    assert "mmproj-F16.gguf hold no experts" in result["reasons"]["kt_weight_format"]


def test_experts_of_another_model_are_warned_about(tmp_path):
    """As many layers, experts 1536 wide instead of 768: not this model's GGUF (fewer layers are refused,
    test_gguf_review_expert_layers.py)."""
    m = fixture.QWEN3_30B
    tensors = fixture.moe_tensors("Q8_0", range(m["layers"]), m["hidden"], 2 * m["width"], m["experts"])
    fixture.write(tmp_path / "Other-Q8_0.gguf", tensors, {"general.file_type": fixture.FILE_TYPES["Q8_0"]})
    result = serve(tmp_path)
    assert any("is it the GGUF of another model?" in w for w in result["warnings"])


def test_a_quant_kt_kernel_cannot_read_is_refused(tmp_path):
    fixture.qwen3_30b(tmp_path, "Q8_0", name="ternary")
    with open(tmp_path / "ternary.gguf", "r+b") as handle:
        at = handle.read(4096).index(b"general.file_type") + len("general.file_type") + 4  # past its u32 type
        handle.seek(at)
        handle.write(fixture.FILE_TYPES["TQ1_0"].to_bytes(4, "little"))
    with pytest.raises(PlanInputError, match="holds TQ1_0 .*which LLAMAFILE does not serve"):
        serve(tmp_path)


def _qwen3_30b_with_one_expert_in(directory: Path, kind: str) -> None:
    """Qwen3-30B-A3B in Q8_0 (general.file_type 7) whose layer-0 gate experts are `kind`, as a file made
    with llama-quantize --tensor-type overrides holds them."""
    m = fixture.QWEN3_30B
    directory.mkdir(parents=True, exist_ok=True)
    tensors = fixture.moe_tensors("Q8_0", range(m["layers"]), m["hidden"], m["width"], m["experts"])
    tensors[0] = (tensors[0][0], kind, tensors[0][2])
    meta = {"general.architecture": "qwen3moe", "general.file_type": fixture.FILE_TYPES["Q8_0"]}
    fixture.write(directory / "Qwen3-30B-A3B-Q8_0.gguf", tensors, meta)


def test_mxfp4_experts_are_read_by_kt_kernel_and_ternary_ones_are_not(tmp_path):
    """kt-kernel 0.7.2's GGUF loader reads MXFP4 (ggml type 39) expert tensors: the wheel's
    kt_kernel/utils/loader.py defines GGMLQuantizationType.MXFP4 = 39 (line 51) and its block size in
    GGML_QUANT_SIZES (line 85), where GGUFLoader looks every expert tensor's type up (line 1063) when
    LlamafileMoEWrapper.load_weights reads it (utils/llamafile.py:192-196); the bundled ggml has
    dequantize_row_mxfp4 and ggml_vec_dot_mxfp4_q8_0. TQ1_0 and TQ2_0 are in neither, so the lookup fails.
    ktinfra refused MXFP4 experts as unreadable."""
    _qwen3_30b_with_one_expert_in(tmp_path / "mxfp4", "MXFP4")
    result = serve(tmp_path / "mxfp4")
    assert result["feasible"], result["problems"]
    assert result["serve"]["kt_weight_format"] == "gguf:Q8_0"
    _qwen3_30b_with_one_expert_in(tmp_path / "ternary", "TQ2_0")
    with pytest.raises(
        PlanInputError, match="expert tensors in TQ2_0, which kt-kernel 0.7.2's LLAMAFILE cannot"
    ):
        serve(tmp_path / "ternary")


# measured on the H200 host with kt-kernel 0.7.2 (docs/results/2026-11-29-h200-gguf-types)
SERVED = (
    "F32",
    "F16",
    "BF16",
    "Q8_0",
    "Q5_0",
    "Q4_0",
    "MXFP4",
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "IQ1_S",
)
ABORTS = ("Q4_1", "Q5_1", "IQ4_NL", "IQ3_S", "IQ3_XXS", "IQ2_S", "IQ2_XS", "IQ1_M")


def test_expert_types_kt_kernel_cannot_serve_are_refused_by_what_the_files_hold(tmp_path):
    """kt-kernel 0.7.2 loads IQ4_NL, IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS, IQ1_M, Q4_1 and Q5_1 expert tensors, then
    the server aborts at its first forward ("llamafile not supported"); IQ2_XXS gives a wrong result (relative
    L2 0.93). A directory whose file type is served (Q8_0) but one of whose experts is in such a type (a
    --tensor-type mix, unsloth's UD quants) was planned, and the server died at its first request."""
    for kind, said in (("IQ3_XXS", "aborts at its first forward"), ("IQ2_XXS", "wrong result"),
                       ("Q4_1", "'llamafile not supported'")):  # fmt: skip
        _qwen3_30b_with_one_expert_in(tmp_path / kind, kind)
        with pytest.raises(PlanInputError, match=f"holds expert tensors in {kind}, which .* {said}"):
            serve(tmp_path / kind)
    for kind in ("Q6_K", "IQ1_S"):
        _qwen3_30b_with_one_expert_in(tmp_path / kind, kind)
        assert serve(tmp_path / kind)["feasible"]


def test_only_file_types_whose_experts_kt_kernel_serves_are_offered():
    offered = {name.removeprefix("GGUF:") for name in sizing.GGUF_FORMATS}
    for quant in gguf_files.EXPERT_MIX:
        served = gguf_files.mix_types(quant) <= set(SERVED) | set(gguf_files.KT_LLAMAFILE_IMPRECISE)
        assert (quant in offered) == served, quant
    assert {"Q4_K_M", "Q5_K_M", "Q6_K", "Q3_K_M", "Q2_K", "IQ4_XS", "IQ1_S"} <= offered
    assert set(ABORTS) | {"IQ2_XXS", "IQ2_M", "IQ3_M", "IQ3_XS"} <= set(gguf_files.EXPERT_MIX) - offered
    with pytest.raises(ValueError, match="IQ2_M puts expert tensors in IQ2_S, IQ3_S, which kt-kernel 0.7.2"):
        sizing.cpu_format("GGUF:IQ2_M")


def test_an_iq4_xs_plan_warns_of_its_larger_error(tmp_path):
    """IQ4_XS is served, with a relative L2 error of 0.06 against the weights (K-quants 0.01-0.02)."""
    result = plan(no_amx(), "Qwen3-30B-A3B", "serve", cpu_format="GGUF:IQ4_XS")
    assert any("computes IQ4_XS expert tensors less exactly" in w for w in result["warnings"])
    assert not any("less exactly" in w for w in plan(no_amx(), "Qwen3-30B-A3B", "serve")["warnings"])


# ---- the command line ------------------------------------------------------------------------------------
def ktinfra(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True, env=env)


def test_cli_plans_the_held_quant_and_refuses_a_contradiction(tmp_path):
    fixture.qwen3_30b(tmp_path, "Q8_0")
    base = ["plan", "--model", "Qwen3-30B-A3B", "--facts", str(NO_AMX), "--weight-path", str(tmp_path)]
    planned = ktinfra(*base, "--json")
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["serve"]["kt_weight_format"] == "gguf:Q8_0"
    refused = ktinfra(*base, "--cpu-format", "GGUF:Q4_K_M")
    assert refused.returncode == 1
    assert "error: --cpu-format GGUF:Q4_K_M names Q4_K_M, but --weight-path" in refused.stderr


# ---- the reader against gguf-py ------------------------------------------------------------------------
def test_reader_agrees_with_gguf_py(tmp_path):
    """ktinfra reads headers itself (no numpy, no gguf dependency); it must agree with the reference."""
    import gguf  # a dev dependency (pyproject), so this check always runs
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
