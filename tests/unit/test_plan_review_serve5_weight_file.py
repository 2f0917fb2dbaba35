"""--weight-path naming a file for converted CPU weights (a directory) is bad input (review 5 of the serve
planner)."""

from pathlib import Path

import pytest

from ktinfra.planner import PlanInputError, load_facts, plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def seed002() -> dict:
    return load_facts(FIXTURES / "facts" / "seed002-autodl-6430-4090.json")


@pytest.mark.parametrize("cpu_format", ["AMXINT8", "AMXINT4"])
def test_a_file_is_refused_as_the_directory_of_converted_weights(tmp_path, cpu_format):
    weights = tmp_path / "experts.safetensors"
    weights.write_bytes(b"\0")
    # before: planned, feasible, "<file>: the conversion writes 29.0 GB of int8 weights there"
    with pytest.raises(PlanInputError, match=r"--weight-path .*experts\.safetensors is a file: int[48] CPU"):
        plan(seed002(), "Qwen3-30B-A3B", "serve", weight_path=str(weights), cpu_format=cpu_format)


def test_a_directory_still_to_be_written_is_planned(tmp_path):
    weights = tmp_path / "int8"
    result = plan(seed002(), "Qwen3-30B-A3B", "serve", weight_path=str(weights), cpu_format="AMXINT8")
    assert result["serve"]["kt_weight_path"] == str(weights)
    why = result["reasons"]["kt_weight_path"]
    assert why == f"{weights}: the conversion writes 29.0 GB of int8 weights there"
