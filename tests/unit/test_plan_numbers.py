"""`ktinfra models` and `ktinfra plan` agree on the numbers they show."""

import re
from pathlib import Path

import pytest

from ktinfra import catalog, sizing
from ktinfra.commands.models import _rows
from ktinfra.plan import formats
from ktinfra.planner import load_facts, plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GB = 1e9


def facts(name: str) -> dict:
    return load_facts(FIXTURES / "facts" / f"{name}.json")


def small_gpu() -> dict:
    host = facts("h100-amx")
    host["gpus"][0].update(name="NVIDIA RTX A4000", memory_mib=16376, compute_capability="8.6")
    return host


def numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"(\d+(?:\.\d)?) GB", text)]


# --- #7 `ktinfra models` sizes each format from the checkpoint `ktinfra plan` serves from --------------
@pytest.mark.parametrize("model", ["DeepSeek-V3", "Kimi-K2", "Qwen3-30B-A3B"])
def test_models_rows_are_what_plan_would_need(model):
    arch = catalog.resolve(model)
    row = next(r for r in _rows() if r["name"] == arch.name)
    for use, estimate in row["sizing"].items():
        if use.startswith("serve:"):
            fmt = sizing.cpu_format(use.removeprefix("serve:"))
            assert estimate == formats.estimate(arch, fmt).to_dict(), use


def test_bf16_row_of_an_fp8_model_matches_the_plan():
    host = facts("dual-spr-2xnuma-4xl40s")
    host["memory"]["total_bytes"] = 4 * 10**12
    result = plan(host, "DeepSeek-V3", "serve", cpu_format="BF16")
    row = next(r for r in _rows() if r["name"] == "DeepSeek-V3")["sizing"]["serve:BF16"]
    assert [row[k] for k in ("vram_bytes", "ram_bytes", "disk_bytes")] == list(
        result["requirements"].values()
    )
