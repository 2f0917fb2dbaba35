"""The SFT plan of a dummy-image template's model (Qwen3.5-MoE, Qwen3-VL-MoE) sizes VRAM for cutoff_len + 128
tokens a sample: the collator adds the image's tokens to the first sample of a text-only batch and pads the
others to it, so the GPU holds batch x (cutoff_len + 128) tokens, not batch x cutoff_len."""

from __future__ import annotations

import json
from pathlib import Path

import model_configs
import pytest

from ktinfra import catalog, sizing
from ktinfra.planner import load_facts, plan

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"


def _sft(tmp_path, config: dict) -> tuple[dict, object]:
    (tmp_path / "config.json").write_text(json.dumps(config))
    facts = load_facts(str(FACTS / "dual-spr-2xnuma-4xl40s.json"))
    return plan(facts, str(tmp_path), "sft", stack="kt-0.7"), catalog.resolve(str(tmp_path))


@pytest.mark.parametrize(
    ("name", "room"), [("QWEN3_5_35B_A3B", 128), ("QWEN3_VL_30B_A3B", 128), ("QWEN2_57B_A14B", 0)]
)
def test_vram_is_sized_with_the_dummy_images_tokens(tmp_path, name, room):
    result, arch = _sft(tmp_path, getattr(model_configs, name))
    sft = result["sft"]
    est = sizing.sft(arch, cutoff_len=sft["cutoff_len"] + room, batch_size=sft["per_device_train_batch_size"])
    assert result["requirements"]["vram_bytes"] == est.vram_bytes
    assert ("dummy-image tokens" in result["reasons"]["vram_bytes"]) == bool(room)
