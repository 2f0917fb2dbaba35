"""kt-kernel's LLAMAFILE (GGUF) backend splits each expert's intermediate dimension over the thread pools in
QK_K = 256-weight blocks. The kt-kernel 0.7.2 wheel (kt_kernel/utils/llamafile.py, LlamafileMoEWrapper.
__init__) raises ValueError at load for a width that is not a multiple of 256 (line 94) and for a
threadpool_count above width / 256 (base_blocks == 0, line 106). The planner planned both: DeepSeek-V2-Lite
(width 1408) on LLAMAFILE, and one pool per NUMA node for Qwen3-30B-A3B (width 768: 3 blocks) on 4 nodes.
"""

from __future__ import annotations

import copy
from pathlib import Path

from ktinfra.planner import load_facts, plan

REPO = Path(__file__).resolve().parents[2]
NO_AMX = REPO / "tests" / "fixtures" / "facts" / "xeon8352v-4090-noamx.json"


def four_nodes(bf16: bool = False) -> dict:
    """The no-AMX 8352V host with 4 NUMA nodes of 8 usable cores (an NPS4-like layout)."""
    facts = copy.deepcopy(load_facts(NO_AMX))
    cpu = facts["cpu"]
    cpu.update({"numa_nodes": 4, "physical_cores": 32, "logical_cpus": 64, "threads_per_core": 2})
    cpu.update({"cores_per_numa_node": 8, "quota_cpus": None, "usable_cpus": "0-63"})
    cpu["numa_node_cpus"] = {str(n): f"{8 * n}-{8 * n + 7},{32 + 8 * n}-{32 + 8 * n + 7}" for n in range(4)}
    cpu["numa_node_physical_cores"] = {str(n): 8 for n in range(4)}
    cpu["isa"]["avx512_bf16"] = bf16
    return facts


def test_a_width_llamafile_cannot_split_is_a_problem():
    for cpu_format in (None, "GGUF:Q4_K_M", "GGUF:Q8_0"):
        result = plan(load_facts(NO_AMX), "DeepSeek-V2-Lite", "serve", cpu_format=cpu_format)
        assert result["serve"]["kt_method"] == "LLAMAFILE"
        assert not result["feasible"]
        assert any("multiple of 256" in p and "1408" in p for p in result["problems"]), result["problems"]
    # a width of whole blocks plans as before
    assert plan(load_facts(NO_AMX), "Qwen3-30B-A3B", "serve")["feasible"]


def test_llamafile_gets_no_more_pools_than_blocks():
    result = plan(four_nodes(), "Qwen3-30B-A3B", "serve")
    serve = result["serve"]
    assert serve["kt_method"] == "LLAMAFILE" and result["feasible"], result["problems"]
    assert serve["kt_threadpool_count"] == 3  # 768 / 256; one pool per node would be 4
    assert serve["kt_cpuinfer"] % 3 == 0 and serve["kt_cpuinfer"] <= 24
    assert "at most 3" in result["reasons"]["kt_threadpool_count"]
    assert any("idle" in w for w in result["warnings"])
    # other backends still take every node
    native = plan(four_nodes(bf16=True), "Qwen3-30B-A3B", "serve")["serve"]
    assert native["kt_method"] == "BF16" and native["kt_threadpool_count"] == 4
