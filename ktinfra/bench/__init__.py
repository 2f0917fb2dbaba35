"""Load benchmark and capacity search against OpenAI-compatible or SGLang-native endpoints."""

from ktinfra.bench.capacity import level_passes, search
from ktinfra.bench.client import APIS, MAX_TIMEOUT_S, RequestResult, Scenario, make_prompt, send
from ktinfra.bench.deadline import ThreadLimit
from ktinfra.bench.metrics import percentile, summarize
from ktinfra.bench.runner import run_level

__all__ = [
    "APIS",
    "MAX_TIMEOUT_S",
    "RequestResult",
    "Scenario",
    "ThreadLimit",
    "level_passes",
    "make_prompt",
    "percentile",
    "run_level",
    "search",
    "send",
    "summarize",
]
