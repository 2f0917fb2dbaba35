"""docs/planning.md says what the planner does with thread pools (fresh-eyes review 6 of the serve planner):
the kt_threadpool_count bullet must give the rule that the pool count divides the experts' width, and its
example must be what the planner plans."""

import re
from pathlib import Path

from test_plan_review_serve5_pool_split import three_nodes

from ktinfra.planner import plan

PLANNING = Path(__file__).resolve().parents[2] / "docs" / "planning.md"


def _bullet(key: str) -> str:
    text = PLANNING.read_text(encoding="utf-8")
    start = text.index(f"* **{key}")
    end = text.index("\n* **", start + 1)
    return re.sub(r"\s+", " ", text[start:end])


def test_threadpool_bullet_says_the_pool_count_divides_the_expert_width():
    bullet = _bullet("kt_threadpool_count")
    # before: the bullet said n is the count that runs the most threads, nothing of the width
    assert "n also divides `moe_intermediate_size`" in bullet
    assert "`operators/moe-tp.hpp`" in bullet and "must be a multiple of NUMA node count" in bullet
    assert "DeepSeek-V3 (2048-wide experts) gets 2 pools and `kt_cpuinfer` 32" in bullet
    assert "Qwen3-30B-A3B (768) keeps 3" in bullet
    deepseek, qwen = (
        plan(three_nodes(), model, "serve")["serve"] for model in ("DeepSeek-V3", "Qwen3-30B-A3B")
    )
    assert (deepseek["kt_threadpool_count"], deepseek["kt_cpuinfer"]) == (2, 32)
    assert qwen["kt_threadpool_count"] == 3


def test_weight_path_text_says_a_gguf_repos_single_quant_folder_needs_no_cpu_format():
    bullet = _bullet("kt_method / kt_weight_format")
    # before: docs/planning.md said nothing of it; the folder was refused without --cpu-format until 61c7441
    assert "a GGUF repo that keeps its single quant in a folder" in bullet
    assert "read as with `--cpu-format GGUF` and becomes `serve.kt_weight_path`" in bullet
    assert "still need the `--cpu-format` they hold" in bullet
