"""`lora serve --overwrite` is not refused over the conversion it replaces.

lora serve renders the unit before converting, and render serve checks the adapters of serve.lora.paths
readable here (8fc4816; on the legacy stack too since 66229ca): for an adapter about to be converted that
path is the output dir, which with --overwrite still holds the previous conversion. A previous output that
today's checks refuse (here use_dora, say from an older training run) stopped the run with
'plan serve.lora.paths.mine: .../out/mine/adapter_config.json: use_dora is set', naming the directory the
run was asked to replace, although the training output was sound. Render now leaves out the adapters lora
serve converts (their training output was checked before, and convert() inspects the new output)."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from test_lora import kt_dir, peft_dir, serve_args
from test_lora_cli_errors import invoke
from test_lora_input import COPYING_CONVERTER
from test_lora_review4_render_planned import current_plan

from ktinfra.render import RenderError, render_serve


def _training_output(tmp_path, legacy: bool):
    if legacy:  # the legacy stack converts every adapter
        return peft_dir(tmp_path / "in")
    source = kt_dir(tmp_path / "in")  # the current stack converts a KT training output
    peft_dir(tmp_path / "peft")
    for name in ("adapter_config.json", "adapter_model.safetensors"):  # what the stand-in converter copies
        shutil.copy(tmp_path / "peft" / name, source / name)
    return source


@pytest.mark.parametrize("legacy", [False, True], ids=["current", "legacy"])
def test_the_previous_conversion_does_not_stop_its_replacement(tmp_path, legacy):
    converter = tmp_path / "converter.py"
    converter.write_text(COPYING_CONVERTER)
    previous = peft_dir(tmp_path / "out" / "mine")
    config = json.loads((previous / "adapter_config.json").read_text())
    (previous / "adapter_config.json").write_text(json.dumps(config | {"use_dora": True}))
    args = serve_args(
        _training_output(tmp_path, legacy),
        *["--converter", str(converter), "--converter-python", sys.executable],
        *["--output-dir", str(tmp_path / "out"), "--overwrite", "--out", str(tmp_path / "bundle"), "--json"],
    )
    result = invoke([*args, "--legacy"] if legacy else args)
    assert result.exit_code == 0, result.output
    assert "use_dora" not in json.loads((previous / "adapter_config.json").read_text())  # replaced
    assert json.loads(result.stdout)["serve"]["lora"]["paths"] == {"mine": str(previous)}
    assert (tmp_path / "bundle" / "plan-lora.json").is_file()


def test_an_adapter_served_as_it_is_is_still_checked_by_render(tmp_path):
    """Only the converted ones are left out: render still reads one lora serve serves as it is."""
    adapter = peft_dir(tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps(config | {"use_dora": True}))
    plan = current_plan({"a": adapter, "b": tmp_path / "b"})
    with pytest.raises(RenderError, match=r"^plan serve.lora.paths.a: .*use_dora is set"):
        render_serve(plan, name="q", model_path="/m", weight_path="/w", converting=frozenset({"b"}))
    render_serve(plan, name="q", model_path="/m", weight_path="/w", converting=frozenset({"a"}))
