"""The GGUF quants the user-facing texts name as servable are ones `ktinfra plan` takes, and the ones
docs/readme/planner.md names as refused are refused.

`plan --help` offered `GGUF:IQ2_XXS` as an example of `--cpu-format GGUF:<TYPE>` after the planner had
started refusing it (kt-kernel 0.7.2's LLAMAFILE computes a wrong result on it): a user copying the example
got `error: ... cannot serve`. The real CLI plans each named quant on the H100 facts fixture: exit 0 or 2
(feasible or not there) means it was taken, exit 1 with an `error:` line that it was refused."""

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ktinfra.cli import app

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "fixtures" / "facts" / "h100-amx.json"
PLANNER_PAGE = ROOT / "docs" / "readme" / "planner.md"
QUANT = re.compile(r"\b(?:F32|F16|BF16|I?Q\d_[0-9A-Z_]*\w|MXFP4\w*|TQ\d_\d)\b")


def _help_examples() -> list[str]:
    plan = typer.main.get_command(app).commands["plan"]
    text = next(p.help for p in plan.params if "--cpu-format" in p.opts)
    examples = text.split("LLAMAFILE;", 1)[1].split("...", 1)[0]
    return QUANT.findall(examples)


def _page_text() -> str:
    return " ".join(PLANNER_PAGE.read_text(encoding="utf-8").split())


def _served_on_page() -> list[str]:
    return QUANT.findall(_page_text().split("backend serves:", 1)[1].split(". ", 1)[0])


def _refused_on_page() -> list[str]:
    """'Q4_1, Q5_1, IQ4_NL, IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS and IQ1_M load, then kt-kernel aborts ...;
    IQ2_XXS computes a wrong result' (the sentence before 'TQ1_0 and TQ2_0 are unknown to its loader')."""
    text = _page_text()
    aborting = text.split("is served less exactly", 1)[1].split("load, then kt-kernel aborts", 1)[0]
    wrong = text.split("computes a wrong result", 1)[0].rsplit(";", 1)[1]
    return QUANT.findall(aborting) + QUANT.findall(wrong)


def _plan_rc(quant: str) -> tuple[int, str]:
    args = ["plan", "--model", "Qwen3-30B-A3B", "--cpu-format", f"GGUF:{quant}", "--facts", str(FACTS)]
    args.append("--json")
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


def test_the_texts_name_quants():
    """The extraction finds what the texts say (a reworded text fails here, not silently)."""
    assert _help_examples() == ["Q8_0", "Q6_K", "Q4_K_M", "Q2_K"]
    assert len(_served_on_page()) == 18 and _served_on_page()[0] == "F32" and _served_on_page()[-1] == "IQ1_S"
    refused = ["Q4_1", "Q5_1", "IQ4_NL", "IQ3_S", "IQ3_XXS", "IQ2_S", "IQ2_XS", "IQ1_M", "IQ2_XXS"]
    assert _refused_on_page() == refused


@pytest.mark.parametrize("quant", sorted(set(_help_examples() + _served_on_page())))
def test_a_quant_the_texts_offer_is_planned(quant):
    code, output = _plan_rc(quant)
    assert code in (0, 2), output


@pytest.mark.parametrize("quant", _refused_on_page())
def test_a_quant_the_page_calls_refused_is_refused(quant):
    code, output = _plan_rc(quant)
    assert code == 1 and "cannot serve" in output, output
