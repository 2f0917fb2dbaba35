"""Catalog aliases that name another checkpoint of an entry's architecture take that checkpoint's
LLaMA-Factory chat template (review pass): LLaMA-Factory registers DeepSeek-R1 / R1-0528 with `deepseekr1`,
a reasoning template, and DeepSeek-V3 / V3-0324 with `deepseek3`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ktinfra import catalog
from ktinfra.planner import load_facts, plan
from ktinfra.render import chat_templates

FACTS = Path(__file__).resolve().parents[1] / "fixtures" / "facts"


@pytest.mark.parametrize(
    "asked,template",
    [
        ("DeepSeek-R1", "deepseekr1"),
        ("deepseek-ai/DeepSeek-R1", "deepseekr1"),
        ("deepseek-r1-0528", "deepseekr1"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseekr1"),
        ("DeepSeek-V3", "deepseek3"),
        ("DeepSeek-V3-0324", "deepseek3"),
        ("DeepSeek-V3-671B", "deepseek3"),
    ],
)
def test_each_deepseek_checkpoint_gets_its_own_chat_template(asked, template):
    assert catalog.resolve(asked).template == template


def test_sft_plan_of_deepseek_r1_uses_the_reasoning_template():
    result = plan(load_facts(FACTS / "dual-spr-2xnuma-4xl40s.json"), "DeepSeek-R1", "sft")
    assert result["model"]["hf_repo"] == "deepseek-ai/DeepSeek-R1"
    assert result["sft"]["template"] == "deepseekr1"


def test_alias_templates_name_aliases_and_templates_both_stacks_have():
    entries = yaml.safe_load(catalog.CATALOG_PATH.read_text())["models"]
    overrides = [
        (entry, repo, name) for entry in entries for repo, name in entry.get("alias_templates", {}).items()
    ]
    assert overrides
    for entry, repo, name in overrides:
        assert repo in entry.get("aliases", []), repo
        for generation, record in chat_templates.recorded().items():
            assert name in record["names"], (generation, name)


def test_an_extending_entry_does_not_take_its_parents_gguf_repo():
    """Qwen3-30B-A3B-Instruct-2507 is another checkpoint: Qwen/Qwen3-30B-A3B-GGUF holds the base model's
    experts, which would not match the 2507 weights SGLang serves on the GPU."""
    assert catalog.resolve("Qwen3-30B-A3B").gguf_repo == "Qwen/Qwen3-30B-A3B-GGUF"
    assert catalog.resolve("Qwen3-30B-A3B-Instruct-2507").gguf_repo is None
    assert catalog.resolve("Qwen3-30B-A3B-Instruct-2507").template == "qwen3_nothink"
