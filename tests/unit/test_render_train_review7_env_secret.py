"""render train refuses a bad value of the plan's sft.launcher.env (written into the 0600 env file: it may
hold a token) without repeating the value: the message reaches the play's output and logs."""

from __future__ import annotations

import pytest
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError
from ktinfra.render.train import render_train

ARGS = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}


@pytest.mark.parametrize("value", ["hf_secret part", "hf_secret'quote", "hf_secret$x", ""])
def test_a_bad_launcher_env_value_is_refused_without_showing_it(tmp_path, value):
    plan = load_fixture_plan("h100-qwen3-30b-a3b-sft-current.json")
    plan["sft"]["launcher"]["env"] = {"HF_TOKEN": value}
    args = {"python": str(tmp_path / "absent" / "bin" / "python"), "llamafactory_dir": str(tmp_path / "lf")}
    with pytest.raises(RenderError) as refused:
        render_train(plan, **ARGS, **args)
    assert "HF_TOKEN" in str(refused.value)
    assert "hf_secret" not in str(refused.value) and "(the value is not shown)" in str(refused.value)


def test_a_good_token_still_reaches_the_env_file_only(tmp_path):
    plan = load_fixture_plan("h100-qwen3-30b-a3b-sft-current.json")
    plan["sft"]["launcher"]["env"] = {"HF_TOKEN": "hf_secret0"}
    args = {"python": str(tmp_path / "absent" / "bin" / "python"), "llamafactory_dir": str(tmp_path / "lf")}
    rendered = render_train(plan, **ARGS, **args)
    holding = {name: mode for name, (text, mode) in rendered.files.items() if "hf_secret0" in text}
    assert holding == {"ktinfra-train-r.env": 0o600}
