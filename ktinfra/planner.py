"""Public planning API for the CLI, the Ansible preflight role, render and bench.

from ktinfra.planner import plan
result = plan(facts, "Qwen3-30B-A3B", "serve", stack="kt-0.7")
"""

from __future__ import annotations

import json
from pathlib import Path

from ktinfra.plan import MODES, PlanInputError, plan
from ktinfra.plan.host import FactsError, validate

__all__ = ["MODES", "PlanInputError", "load_facts", "plan"]


MAX_FACTS_BYTES = 16 << 20  # a facts file is a few KB; a 1024-GPU host's still far below this


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def load_facts(path: str | Path) -> dict:
    """A facts JSON document (`ktinfra facts --json` output); PlanInputError when unreadable or when a key
    the planner reads is missing or of the wrong type (the same check `plan` makes)."""
    try:
        with Path(path).open("rb") as handle:  # bounded: --facts /dev/zero took all memory
            raw = handle.read(MAX_FACTS_BYTES + 1)
    except IsADirectoryError:
        raise PlanInputError(
            f"facts file {path} is a directory: a capture folder (`ktinfra facts --capture`) goes to --from"
        ) from None
    except OSError as exc:
        raise PlanInputError(f"cannot read facts file {path}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_FACTS_BYTES:
        raise PlanInputError(f"facts file {path} is over {MAX_FACTS_BYTES >> 20} MiB: not a facts file")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, nesting too deep
        why = str(exc)[:200] or type(exc).__name__
        raise PlanInputError(f"facts file {path} is not JSON: {why}") from exc
    if not isinstance(data, dict):
        raise PlanInputError(f"facts file {path} must hold a JSON object")
    try:
        return validate(data)
    except FactsError as exc:
        raise PlanInputError(f"{path}: {exc}") from exc
