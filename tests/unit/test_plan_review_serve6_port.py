"""plan()'s port takes what the CLI (--port 1-65535) and render serve take (fresh-eyes review 6)."""

from pathlib import Path

import pytest

from ktinfra.planner import PlanInputError, load_facts, plan
from ktinfra.render import RenderError, render_serve

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts" / "h100-amx.json"
MODEL = "Qwen3-30B-A3B"


@pytest.mark.parametrize("port", [0, 70000, -1, True, "8080"])
def test_plan_refuses_a_port_render_would_refuse_with_renders_message(port):
    """Before: port=0 became 30000 without a word, and 70000 was planned for render to refuse later."""
    with pytest.raises(PlanInputError) as refused:
        plan(load_facts(FACTS), MODEL, "serve", port=port)
    planned = plan(load_facts(FACTS), MODEL, "serve")
    planned["serve"]["port"] = port
    with pytest.raises(RenderError) as rendered:
        render_serve(planned, name="q30", model_path="/m", weight_path="/w")
    assert str(refused.value) == f"port must be an integer 1-65535 (--port or plan serve.port), got {port!r}"
    assert str(rendered.value) == str(refused.value)


@pytest.mark.parametrize(
    ("port", "expected", "why"), [(None, 30000, "SGLang's default"), (1, 1, "set explicitly")]
)
def test_plan_keeps_the_default_and_the_ends_of_the_range(port, expected, why):
    result = plan(load_facts(FACTS), MODEL, "serve", port=port)
    assert result["serve"]["port"] == expected and result["reasons"]["port"] == f"{expected}: {why}"
    assert plan(load_facts(FACTS), MODEL, "serve", port=65535)["serve"]["port"] == 65535
