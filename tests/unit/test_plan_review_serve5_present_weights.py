"""CPU weights already in --weight-path on a GPU that holds every expert: the warning that they go unread
must not say '0.0 GB ... would be downloaded / converted' (review 5 of the serve planner)."""

from pathlib import Path

from gguf_fixture import qwen3_30b

from ktinfra.planner import load_facts, plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def h100() -> dict:
    """The H100 capture (80 GB): all 128 experts of Qwen3-30B-A3B fit on the GPU."""
    return load_facts(FIXTURES / "facts" / "h100-amx.json")


def unread_warning(result: dict) -> str:
    assert result["serve"]["kt_num_gpu_experts"] == 128
    found = [w for w in result["warnings"] if w.startswith("every expert fits on the GPU")]
    assert len(found) == 1, result["warnings"]
    return found[0]


def test_a_gguf_directory_already_there_is_not_said_to_be_downloaded(tmp_path):
    weights = tmp_path / "Qwen3-30B-A3B-GGUF"
    qwen3_30b(weights, "Q4_K_M")
    result = plan(h100(), "Qwen3-30B-A3B", "serve", weight_path=str(weights))
    assert result["requirements_breakdown"]["cpu_weights_on_disk"] == 0  # held, not charged again
    warning = unread_warning(result)
    # before: "the 0.0 GB of gguf:Q4_K_M CPU weights would be downloaded and never read"
    said = warning.replace(str(weights), "<weights>")
    assert "0.0 GB" not in said and "downloaded" not in said
    assert f"the gguf:Q4_K_M CPU weights in {weights} (17.6 GB of experts) would never be read" in warning


def test_converted_weights_already_there_are_not_said_to_be_converted(tmp_path):
    weights = tmp_path / "int8"
    weights.mkdir()
    (weights / "layer0.bin").write_bytes(b"\0")
    result = plan(h100(), "Qwen3-30B-A3B", "serve", weight_path=str(weights), cpu_format="AMXINT8")
    assert result["serve"]["kt_method"] == "AMXINT8"
    warning = unread_warning(result)
    # before: "the 0.0 GB of int8 CPU weights would be converted and never read"
    said = warning.replace(str(weights), "<weights>")  # pytest's tmp_path names the test
    assert "0.0 GB" not in said and "converted" not in said
    assert f"the int8 CPU weights in {weights} (29.0 GB of experts) would never be read" in warning


def test_weights_still_to_be_written_keep_their_size_in_the_warning():
    result = plan(h100(), "Qwen3-30B-A3B", "serve", cpu_format="AMXINT8")
    assert "the 29.0 GB of int8 CPU weights would be converted and never read" in unread_warning(result)
