"""`ktinfra lora serve`: two adapters never convert into one directory, nor into the directory another adapter
of the run is read from; refused before any converter runs."""

from __future__ import annotations

import sys
from pathlib import Path

from test_lora import H100, merged_kt_dir, peft_dir
from test_lora_cli_errors import assert_clean_error, invoke
from test_lora_input import COPYING_CONVERTER

PEFT_FILES = ["adapter_config.json", "adapter_model.safetensors"]


def _legacy_args(converter: Path, *adapters: str) -> list[str]:
    """The legacy stack: its sglang fork serves several converted adapters in one server."""
    args = ["lora", "serve", "--base", "/models/Qwen3-30B-A3B", "--model", "Qwen3-30B-A3B", "--from",
            str(H100), "--converter", str(converter), "--legacy", "--converter-python", sys.executable,
            "--json"]  # fmt: skip
    for spec in adapters:
        args += ["--adapter", spec]
    return args


def test_two_adapters_converting_into_one_directory_are_refused_before_converting(tmp_path):
    """Before: both names of one training output converted into one <dir>_sglang; the second stopped with
    "already exists; pass --overwrite" (wrong advice: this run made it), after the first had converted."""
    converter = tmp_path / "converter.py"
    converter.write_text(COPYING_CONVERTER)
    out = merged_kt_dir(tmp_path / "out")
    for extra in ([], ["--overwrite"]):
        result = invoke([*_legacy_args(converter, f"mine={out}", f"again={out}"), *extra])
        assert_clean_error(result, f"adapters mine and again would both be converted into {out}_converted")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["converter.py", "out"]


def test_a_conversion_into_another_adapters_input_is_refused_before_converting(tmp_path):
    """Before: with --overwrite, the first adapter's conversion replaced the directory the second one is
    read from (and then converted); without it, the advice was to pass --overwrite."""
    converter = tmp_path / "converter.py"
    converter.write_text(COPYING_CONVERTER)
    one, other = merged_kt_dir(tmp_path / "one"), peft_dir(tmp_path / "conv" / "mine")
    args = [*_legacy_args(converter, f"mine={one}", f"b={other}"), "--output-dir", str(tmp_path / "conv")]
    for extra in ([], ["--overwrite"]):
        result = invoke([*args, *extra])
        refusal = f"adapter mine would be converted into {other}, which adapter b is read from"
        assert_clean_error(result, refusal)
        assert sorted(p.name for p in other.iterdir()) == PEFT_FILES
        assert sorted(p.name for p in (tmp_path / "conv").iterdir()) == ["mine"]
