"""render convert against what kt-kernel's convert_cpu_weights.py (v0.7.0 / v0.4.4) is given."""

from __future__ import annotations

import pytest
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError
from ktinfra.render.convert import render_convert


def test_an_empty_input_type_is_refused_not_read_as_bf16():
    """`--input-type ''` became bf16 even where the plan's model ships FP8, so convert_cpu_weights.py would
    read FP8 weights as BF16; left out, the plan's native dtype is taken."""
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    plan["model"]["native_dtype"] = "fp8"
    argv = render_convert(model_path="/m", output="/o", plan=plan).info["argv"]
    assert argv[argv.index("--input-type") + 1] == "fp8"
    with pytest.raises(RenderError, match="--input-type is empty"):
        render_convert(model_path="/m", output="/o", plan=plan, input_type="")
