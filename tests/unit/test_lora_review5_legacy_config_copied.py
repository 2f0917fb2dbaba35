"""On the legacy stack the served adapter_config.json is the training output's own.

The fork's convert_lora.py renames the tensors and copies every other file as it is (eaf832e convert_lora.py,
shutil.copy2), and the fork reads target_modules, r and lora_alpha with [key] (srt/lora/lora_config.py) and
stops at start on a target_modules string (lora_manager.py init_lora_shapes). `lora serve --legacy` and
`render lora-convert --legacy` checked only the tensors and the fused file: an adapter with target_modules
"all-linear" or no lora_alpha was converted and its unit rendered with exit 0, for a server that stops at
start. Both now run check_served_as_is on legacy inputs, before converting (kt-kernel's converter, on the
current stack, writes its own adapter_config.json)."""

from __future__ import annotations

import json
import sys

import pytest
from test_lora import peft_dir, serve_args
from test_lora_cli_errors import invoke
from test_lora_input import COPYING_CONVERTER

from ktinfra.render.common import RenderError
from ktinfra.render.convert import render_lora_convert


def _edited(root, **fields):
    adapter = peft_dir(root)
    config = json.loads((adapter / "adapter_config.json").read_text()) | fields
    kept = {key: value for key, value in config.items() if value is not None}  # None: the key removed
    (adapter / "adapter_config.json").write_text(json.dumps(kept))
    return adapter


CASES = [
    ({"target_modules": "all-linear"}, "target_modules is the string 'all-linear'"),
    ({"lora_alpha": None}, "no lora_alpha; SGLang reads"),
]


@pytest.mark.parametrize(("fields", "said"), CASES, ids=["target-modules-string", "no-lora-alpha"])
def test_lora_serve_legacy_refuses_it_before_converting(tmp_path, fields, said):
    converter = tmp_path / "converter.py"
    converter.write_text(COPYING_CONVERTER)
    adapter = _edited(tmp_path / "in", **fields)
    run = ["--converter", str(converter), "--converter-python", sys.executable, "--legacy"]
    out = tmp_path / "out"
    result = invoke(serve_args(adapter, *run, "--output-dir", str(out), "--out", str(tmp_path / "bundle")))
    assert result.exit_code == 1, result.output
    assert said in result.output and "Traceback" not in result.output
    assert not out.exists() and not (tmp_path / "bundle").exists()


@pytest.mark.parametrize(("fields", "said"), CASES, ids=["target-modules-string", "no-lora-alpha"])
def test_render_lora_convert_legacy_refuses_it(tmp_path, fields, said):
    adapter = _edited(tmp_path / "in", **fields)
    with pytest.raises(RenderError, match=said):
        render_lora_convert(
            adapter=str(adapter), output=str(tmp_path / "out"), legacy=True, python=sys.executable,
            script="/x/convert_lora.py",
        )  # fmt: skip


def test_a_sound_adapter_is_still_converted_on_the_legacy_stack(tmp_path):
    converter = tmp_path / "converter.py"
    converter.write_text(COPYING_CONVERTER)
    run = ["--converter", str(converter), "--converter-python", sys.executable, "--legacy"]
    out = tmp_path / "out"
    result = invoke(serve_args(peft_dir(tmp_path / "in"), *run, "--output-dir", str(out)))
    assert result.exit_code == 0, result.output
    assert (out / "mine" / "adapter_config.json").is_file()
