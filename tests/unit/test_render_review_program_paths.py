"""`render serve` and `render train` check --python as `render convert` does (a57bc40): a path ending in '/',
'/.' or '/..' names a directory. Before, serve rendered `ExecStart=... /opt/kt/envs/kt-kernel/bin/python/
-c ...`, which systemd does not load ("Executable path specifies a directory"), and train ran
`.../bin/python/llamafactory-cli` (its bin dir taken from a python that is a directory)."""

from __future__ import annotations

import json

import pytest
from test_render_hardening import SEED002, SERVE, SFT_CURRENT, SFT_LEGACY, TRAIN, assert_one_line_error, run

from ktinfra.render import RenderError, render_serve
from ktinfra.render.train import render_train

PYTHON = "/opt/kt/envs/kt-kernel/bin/python"


@pytest.mark.parametrize("tail", ["/", "/.", "/.."])
def test_serve_and_train_refuse_a_python_naming_a_directory(tail):
    serve = json.loads(SEED002.read_text())
    with pytest.raises(RenderError, match="--python .* names a directory, not a program"):
        render_serve(serve, name="q", model_path="/m", weight_path="/w", python=PYTHON + tail)
    assert render_serve(serve, name="q", model_path="/m", weight_path="/w", python=PYTHON)
    for fixture in (SFT_CURRENT, SFT_LEGACY):
        sft = json.loads(fixture.read_text())
        with pytest.raises(RenderError, match="--python .* names a directory, not a program"):
            render_train(sft, name="r1", python=PYTHON + tail, **TRAIN)
        assert render_train(sft, name="r1", python=PYTHON, **TRAIN)


def test_on_the_command_line_it_is_a_one_line_error_and_nothing_is_written(tmp_path):
    out = tmp_path / "out"
    result = run([*SERVE, "--plan", SEED002, "--python", PYTHON + "/", "--out", out])
    assert_one_line_error(result, "names a directory, not a program")
    assert not out.exists()
