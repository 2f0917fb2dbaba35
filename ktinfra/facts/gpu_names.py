"""Compute capability from an NVIDIA GPU's name, for drivers that cannot tell it.

Drivers before R510 refuse `compute_cap` in `nvidia-smi --query-gpu`, and `nvidia-smi -q -x` has no
compute capability on most drivers. The names below are the ones nvidia-smi prints (with or without the
"NVIDIA "/"Tesla " prefix); the capabilities are NVIDIA's published ones (developer.nvidia.com/cuda-gpus).
A name that matches none stays unknown (null), and `plan` says so.
"""

from __future__ import annotations

import re

# first match wins: the Ada and Blackwell workstation cards share "RTX 6000" with the Turing one
_BY_NAME: list[tuple[str, str]] = [
    (r"\bRTX PRO \d{4}\b.*Blackwell|\bRTX 50\d0\b", "12.0"),
    (r"\bG?B[12]00\b", "10.0"),
    (r"\bRTX \d{4} Ada\b|\bRTX 40\d0\b|\bL40S?\b|\bL4\b|\bL20\b", "8.9"),
    (r"\bG?H100\b|\bH800\b|\bG?H200\b|\bH20\b", "9.0"),
    (r"\bA100\b|\bA800\b|\bA30\b", "8.0"),
    (r"\bA10G?\b|\bA16\b|\bA2\b|\bA40\b|\bRTX A\d{3,4}\b|\bRTX 30\d0\b", "8.6"),
    (r"\bT4\b|\bRTX 20\d0\b|\bQuadro RTX \d{4}\b|\bTITAN RTX\b|\bGTX 16\d0\b", "7.5"),
    (r"\bV100\b|\bTITAN V\b", "7.0"),
    (r"\bP100\b", "6.0"),
    (r"\bP40\b|\bP4\b|\bGTX 10\d0\b|\bTITAN Xp\b", "6.1"),
]
_PATTERNS = [(re.compile(pattern, re.IGNORECASE), capability) for pattern, capability in _BY_NAME]


def capability_from_name(name: str | None) -> str | None:
    """The compute capability of a GPU model nvidia-smi names `name`; None when the name is not known."""
    for pattern, capability in _PATTERNS:
        if name and pattern.search(name):
            return capability
    return None
