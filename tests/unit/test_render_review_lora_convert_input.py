"""`ktinfra render lora-convert` read nothing of --adapter, so it rendered a unit for inputs `ktinfra lora
serve` refuses before converting: a KT output of expert LoRA only (sglang-kt refuses the result at start), a
KT output on --legacy (the fork's convert_lora.py copies the fused file unconverted), an adapter with
modules_to_save; and on the current stack for a PEFT adapter or an already converted one, on which kt-kernel's
converter stops (it needs the fused file; lora serve serves those as they are). Where this host can read
--adapter, render now runs the same check function as serve (lora.check_conversion_input -> inspect_adapter,
check_training_outputs) and says the same; an --adapter not here (another host's) renders as before."""

from __future__ import annotations

import json
import sys

import pytest
from test_lora import kt_dir, merged_kt_dir, peft_dir, serve_args
from test_lora_cli_errors import invoke

from ktinfra.render.common import RenderError
from ktinfra.render.convert import render_lora_convert


def _render(adapter, tmp_path, legacy=False, **extra):
    extra |= {"script": "/x/convert_lora.py"} if legacy else {"model_path": "/m", "script": "/x/c.py"}
    return render_lora_convert(
        adapter=str(adapter), output=str(tmp_path / "out"), legacy=legacy, python=sys.executable, **extra
    )


def _expert_only(root):
    kt_dir(root, manifest=False)
    (root / "adapter_model.safetensors").unlink()
    return root


def _modules_to_save(root):
    kt_dir(root, manifest=False)
    config = json.loads((root / "adapter_config.json").read_text())
    (root / "adapter_config.json").write_text(json.dumps(config | {"modules_to_save": ["lm_head"]}))
    return root


@pytest.mark.parametrize(
    ("make", "legacy", "said"),
    [
        (_expert_only, False, "has LoRA on the routed experts only"),
        (kt_dir, True, "holds kt-kernel's fused expert LoRA"),
        (_modules_to_save, False, "modules_to_save ['lm_head'] is set"),
    ],
    ids=["expert-only", "kt-on-legacy", "modules_to_save"],
)
def test_render_refuses_what_lora_serve_refuses_in_the_same_words(tmp_path, make, legacy, said):
    adapter = make(tmp_path / "mine")
    with pytest.raises(RenderError) as caught:
        _render(adapter, tmp_path, legacy)
    assert said in str(caught.value)
    converter = tmp_path / "c.py"
    converter.write_text("")
    run = ["--converter", str(converter), "--converter-python", sys.executable, "--dry-run"]
    served = invoke([*serve_args(adapter, *run), *(["--legacy"] if legacy else [])])
    assert served.exit_code == 1, served.output
    assert served.output == f"error: {caught.value}\n"  # one check function: the same message


@pytest.mark.parametrize("make", [peft_dir, merged_kt_dir], ids=["peft", "converted"])
def test_render_refuses_an_input_kt_kernels_converter_stops_on(tmp_path, make):
    adapter = make(tmp_path / "mine")
    with pytest.raises(RenderError, match="not a KT training output .* kt-kernel's converter stops"):
        _render(adapter, tmp_path)
    assert _render(adapter, tmp_path, legacy=True)  # the fork's convert_lora.py takes a PEFT adapter


def test_the_cli_writes_nothing_and_a_kt_output_or_a_remote_path_renders(tmp_path):
    units = tmp_path / "units"
    args = ["render", "lora-convert", "--output", str(tmp_path / "o"), "--model-path", "/m"]
    args += ["--python", sys.executable, "--script", "/x/c.py", "--out", str(units)]
    result = invoke([*args, "--adapter", str(_expert_only(tmp_path / "e"))])
    assert result.exit_code == 1 and "routed experts only" in result.output, result.output
    assert not units.exists()
    assert _render(kt_dir(tmp_path / "kt"), tmp_path).info["argv"][2] == str(tmp_path / "kt")
    assert _render(tmp_path / "not-on-this-host", tmp_path)


def test_render_refuses_a_lora_alpha_the_converter_would_drop(tmp_path):
    """kt-kernel's converter keeps the input's own lora_alpha (_build_adapter_config): --lora-alpha 16 on an
    output of lora_alpha 8 was put on the argv and dropped there; `lora serve` refuses it in these words."""
    adapter = kt_dir(tmp_path / "mine")
    with pytest.raises(RenderError, match="adapter mine: its adapter_config.json has lora_alpha 8, which is"):
        _render(adapter, tmp_path, lora_alpha=16)
    assert _render(adapter, tmp_path, lora_alpha=8).info["argv"][-2:] == ["--lora-alpha", "8"]
