"""`ktinfra lora serve --overwrite`: the previous conversion is replaced whole, and a conversion that cannot
be moved into place keeps it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from test_lora import kt_dir, peft_dir
from test_lora_input import COPYING_CONVERTER

from ktinfra import lora

PEFT_FILES = ["adapter_config.json", "adapter_model.safetensors"]


def _convert_args(tmp_path: Path) -> tuple[lora.Adapter, object]:
    converter = tmp_path / "converter.py"
    converter.write_text(COPYING_CONVERTER)
    adapter = lora.inspect_adapter("mine", kt_dir(tmp_path / "in"))
    return adapter, lambda target: [sys.executable, str(converter), str(adapter.path), str(target)]


def _fail_moving_in(monkeypatch, out: Path, error: BaseException) -> None:
    """lora's os.replace raises `error` when it moves the new conversion into `out`, and works otherwise."""
    real_replace = os.replace

    def replace(src, dst):
        if Path(src).name == "adapter" and Path(dst) == out:
            raise error
        real_replace(src, dst)

    monkeypatch.setattr(lora.os, "replace", replace)


def test_overwrite_replaces_the_previous_conversion_whole(tmp_path):
    adapter, cmd_for = _convert_args(tmp_path)
    out = tmp_path / "out"
    peft_dir(out)
    (out / "stale.txt").write_text("from the last conversion")
    lora.convert(adapter, out, cmd_for, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == PEFT_FILES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["converter.py", "in", "out"]  # no scratch left


def test_a_conversion_that_cannot_be_moved_into_place_keeps_the_previous_one(tmp_path, monkeypatch):
    """Before: --overwrite removed the previous conversion (shutil.rmtree) and then moved the new one in;
    when that move failed, the adapter the server was configured with was gone and nothing replaced it."""
    adapter, cmd_for = _convert_args(tmp_path)
    out = tmp_path / "out"
    peft_dir(out)
    (out / "previous.txt").write_text("the adapter being served")
    _fail_moving_in(monkeypatch, out, OSError(28, "No space left on device", str(out)))
    with pytest.raises(lora.LoraError, match=f"cannot move the converted adapter into {out}"):
        lora.convert(adapter, out, cmd_for, overwrite=True)
    assert (out / "previous.txt").read_text() == "the adapter being served"
    assert sorted(p.name for p in out.iterdir()) == [*PEFT_FILES, "previous.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["converter.py", "in", "out"]


def test_an_interrupt_between_the_two_moves_puts_the_previous_conversion_back(tmp_path, monkeypatch):
    """Before: the previous conversion was only put back on an OSError; a Ctrl-C (KeyboardInterrupt) after it
    was moved aside and before the new one was moved in reached the finally, which removed the scratch
    directory with the previous conversion in it: no adapter at all."""
    adapter, cmd_for = _convert_args(tmp_path)
    out = tmp_path / "out"
    peft_dir(out)
    (out / "previous.txt").write_text("the adapter being served")
    _fail_moving_in(monkeypatch, out, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        lora.convert(adapter, out, cmd_for, overwrite=True)
    assert (out / "previous.txt").read_text() == "the adapter being served"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["converter.py", "in", "out"]
