"""--weight-path at a GGUF repo that keeps its quant in a folder, without --cpu-format: the folder states the
quant as a directory of .gguf files does (review 5 of the serve planner)."""

from pathlib import Path

import pytest
from gguf_fixture import qwen3_30b

from ktinfra.planner import PlanInputError, load_facts, plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def host() -> dict:
    return load_facts(FIXTURES / "facts" / "xeon8352v-4090-noamx.json")


def test_a_repo_with_one_quant_folder_is_read_without_cpu_format(tmp_path):
    repo = tmp_path / "Qwen3-30B-A3B-GGUF"
    qwen3_30b(repo / "Q4_K_M", "Q4_K_M")
    # before: PlanInputError "--weight-path names converted CPU weights: give the --cpu-format they hold
    # (...; a directory of .gguf files states its own)", though --cpu-format GGUF planned the same folder
    result = plan(host(), "Qwen3-30B-A3B", "serve", weight_path=str(repo))
    serve = result["serve"]
    assert (serve["kt_method"], serve["kt_weight_format"]) == ("LLAMAFILE", "gguf:Q4_K_M")
    assert serve["kt_weight_path"] == str(repo / "Q4_K_M")
    named = plan(host(), "Qwen3-30B-A3B", "serve", weight_path=str(repo), cpu_format="GGUF")
    assert named["serve"] == serve and named["requirements"] == result["requirements"]


def test_a_repo_with_several_quant_folders_names_them_without_cpu_format(tmp_path):
    repo = tmp_path / "Qwen3-30B-A3B-GGUF"
    qwen3_30b(repo / "Q4_K_M", "Q4_K_M")
    qwen3_30b(repo / "Q8_0", "Q8_0")
    folders = r"its folders Q4_K_M, Q8_0 do: .* point --weight-path at the one"
    with pytest.raises(PlanInputError, match=folders):
        plan(host(), "Qwen3-30B-A3B", "serve", weight_path=str(repo))


def test_converted_weights_without_gguf_folders_still_need_cpu_format(tmp_path):
    weights = tmp_path / "int8"
    (weights / "_layer_0").mkdir(parents=True)
    (weights / "_layer_0" / "w.bin").write_bytes(b"\0")
    with pytest.raises(PlanInputError, match="give the --cpu-format they hold"):
        plan(host(), "Qwen3-30B-A3B", "serve", weight_path=str(weights))
