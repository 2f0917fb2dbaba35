"""`ktinfra models`: the experts column counts the layers that hold experts (review pass)."""

from __future__ import annotations

import os
import subprocess
import sys


def _models(columns: int) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "ktinfra", "models"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": str(columns)},
        check=True,
    )
    return proc.stdout


def test_experts_column_counts_moe_layers_not_all_layers():
    wide = _models(200)
    # DeepSeek-V3: 256 routed experts in 58 MoE layers (first_k_dense_replace 3 of 61); Kimi-K2: 60 of 61;
    # DeepSeek-V2-Lite: 26 of 27. Before, the column read 256 x 61L, 384 x 61L, 64 x 27L.
    for experts in ("256 x 58L", "384 x 60L", "64 x 26L", "128 x 48L", "128 x 94L"):
        assert experts in wide
    assert "x 61L" not in wide and "x 27L" not in wide
    assert "DeepSeek-V3 (671B, 256 x 58L)" in _models(30)
