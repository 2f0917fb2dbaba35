"""Tensor parallelism over grouped KV heads (fresh-eyes review 6 of the serve planner): SGLang's
QKVParallelLinear splits the KV heads over tp < their count and copies each on tp / kv ranks at or above it,
asserting that one divides the other."""

import json
from pathlib import Path

import pytest
from model_configs import GLM_4_5_AIR

from ktinfra.planner import load_facts, plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = {"name": "NVIDIA H200", "memory_mib": 143771, "compute_capability": "9.0"}


def _serve(tmp_path: Path, kv_heads: int, gpus: int) -> dict:
    """GLM-4.5-Air's shape (96 attention heads) with `kv_heads` grouped KV heads, on `gpus` H200s."""
    host = load_facts(FIXTURES / "facts" / "h100-amx.json")
    host["gpus"] = [{"index": i, **H200} for i in range(gpus)]
    model = tmp_path / f"GLM-4.5-Air-kv{kv_heads}"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({**GLM_4_5_AIR, "num_key_value_heads": kv_heads}))
    return plan(host, str(model), "serve")


@pytest.mark.parametrize(
    ("kv_heads", "gpus", "tp"),
    [
        (12, 8, 4),  # 8 ranks cannot split 12 KV heads (12 % 8), nor copy them (8 % 12): before, TP 8
        (6, 4, 2),  # 6 % 4 and 4 % 6: before, TP 4
        (6, 8, 2),
        (8, 8, 8),  # GLM-4.5-Air's own 8 KV heads: one a rank
        (4, 8, 8),  # each of 4 KV heads copied on 2 ranks
    ],
)
def test_tensor_parallel_size_splits_or_copies_the_kv_heads_evenly(tmp_path, kv_heads, gpus, tp):
    serve = _serve(tmp_path, kv_heads, gpus)["serve"]
    assert serve["tensor_parallel_size"] == tp
    assert serve["gpu_indices"] == list(range(tp))


def test_reason_names_the_kv_heads_where_they_limit_tensor_parallelism(tmp_path):
    result = _serve(tmp_path, 12, 8)
    why = result["reasons"]["tensor_parallel_size"]
    assert "divides 96 heads and whose ranks split 12 KV heads evenly, or copy each evenly" in why
    assert "left out GPU 4" in result["reasons"]["gpu_indices"]
