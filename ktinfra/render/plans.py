"""Read and check the parts of a `ktinfra plan --json` document (docs/CONTRACTS.md) that renderers use."""

from __future__ import annotations

import json
import math
import unicodedata
from pathlib import Path

from ktinfra.render.common import RenderError

MODES = ("serve", "sft")
PLAN_SCHEMA = 1
# A plan is a few kB and nests 4-5 levels; far beyond that it is not one, and deep nesting would
# exhaust the recursion of copy.deepcopy and json.dumps later.
MAX_PLAN_BYTES = 8 * 1024 * 1024
MAX_PLAN_DEPTH = 64


def load_plan(path: str | Path) -> dict:
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise RenderError(f"cannot read plan {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_PLAN_BYTES:
        raise RenderError(f"plan {path} is larger than {MAX_PLAN_BYTES} bytes: not a `ktinfra plan` output")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RenderError(f"plan {path} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RenderError(
            f"plan {path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except RecursionError:
        raise RenderError(f"plan {path} nests deeper than {MAX_PLAN_DEPTH} levels: not a plan") from None
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        raise RenderError(f"plan {path} is not valid JSON: {exc}") from None
    if not isinstance(plan, dict):
        raise RenderError(f"plan {path} must be a JSON object (the output of `ktinfra plan --json`)")
    if _depth(plan) > MAX_PLAN_DEPTH:
        raise RenderError(f"plan {path} nests deeper than {MAX_PLAN_DEPTH} levels: not a plan")
    return plan


def _depth(value: object) -> int:
    """How deeply value nests lists and objects (iterative: no recursion limit to hit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            if depth <= MAX_PLAN_DEPTH:
                stack.extend((child, depth + 1) for child in item)
    return deepest


def resolve_plan(
    plan_file: Path | None,
    model: str | None,
    facts: Path | None,
    from_dir: Path | None,
    mode: str,
    stack: str | None = None,
) -> dict:
    """The plan from --plan, or from the planner for --model on --facts / --from / this host."""
    if plan_file is not None:
        if model is not None:
            raise RenderError("give either --plan or --model, not both")
        planning = [
            opt
            for opt, value in (("--facts", facts), ("--from", from_dir), ("--stack", stack))
            if value is not None
        ]
        if planning:  # they only feed on-the-fly planning: with --plan they would be ignored
            raise RenderError(f"{' and '.join(planning)} plan with --model; --plan FILE is already a plan")
        return load_plan(plan_file)
    if model is None:
        raise RenderError("a plan is required: --plan FILE.json (from `ktinfra plan --json`) or --model M")
    try:
        from ktinfra import planner
    except ImportError as exc:
        raise RenderError(f"the planner is not in this build ({exc}); pass --plan FILE.json") from exc
    host = _host_facts(planner, facts, from_dir)
    try:
        return planner.plan(host, model, mode, stack=stack)
    except planner.PlanInputError as exc:
        raise RenderError(str(exc)) from exc


def _host_facts(planner, facts: Path | None, from_dir: Path | None) -> dict:
    if facts is not None and from_dir is not None:
        raise RenderError("give either --facts or --from, not both")
    if facts is not None:
        try:
            return planner.load_facts(facts)
        except planner.PlanInputError as exc:
            raise RenderError(str(exc)) from exc
    try:
        from ktinfra import facts as facts_module
    except ImportError as exc:
        raise RenderError(f"host facts are not in this build ({exc}); pass --plan FILE.json") from exc
    if from_dir is None:
        return facts_module.gather_live()
    try:
        return facts_module.from_capture(from_dir)
    except (OSError, ValueError) as exc:  # a missing folder, or one holding none of the capture's files
        raise RenderError(f"--from {from_dir}: {exc}") from exc


def plan_section(plan: dict, mode: str) -> dict:
    """The plan's `serve` or `sft` block, after checking that the plan is for that mode and feasible."""
    if not isinstance(plan, dict):
        raise RenderError("plan must be a JSON object (the output of `ktinfra plan --json`)")
    actual = plan.get("mode")
    if actual is None and {"cpu", "memory", "gpus"} <= plan.keys():
        raise RenderError(
            "this is a facts document (`ktinfra facts --json`), not a plan: plan from it with --model M "
            "--facts FILE, or pass `ktinfra plan --json` output as --plan"
        )
    if actual not in MODES:
        raise RenderError(f"plan has unknown mode {actual!r}; expected one of {', '.join(MODES)}")
    if actual != mode:
        raise RenderError(f"this renderer needs a {mode} plan, got a {actual} plan")
    schema = plan.get("schema")
    if type(schema) is not int or schema != PLAN_SCHEMA:
        found = "has no schema key" if "schema" not in plan else f"has schema {schema!r}"
        raise RenderError(
            f"plan {found}: render reads `ktinfra plan --json` output of schema {PLAN_SCHEMA} "
            "(re-plan with this ktinfra)"
        )
    if "feasible" not in plan:
        raise RenderError("plan has no feasible key: only a plan that says `feasible: true` is rendered")
    feasible = plan["feasible"]
    if feasible is False:
        problems = "; ".join(str(p) for p in plan.get("problems") or []) or "no problems listed"
        raise RenderError(f"plan is not feasible ({problems}); fix the host or the plan first")
    if feasible is not True:
        raise RenderError(
            f"plan key feasible must be true or false, got {feasible!r}: only a plan that says "
            "`feasible: true` is rendered"
        )
    section = plan.get(mode)
    if not isinstance(section, dict):
        raise RenderError(f"plan has no {mode!r} object")
    return section


def _object_section(plan: dict, key: str) -> dict:
    """The plan's `key` block ({} where the plan has none); RenderError when it is not an object."""
    block = plan.get(key)
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise RenderError(f"plan {key} must be an object, not {block!r}")
    return block


def host_section(plan: dict) -> dict:
    return _object_section(plan, "host")


def host_gpu_indices(plan: dict) -> list[int]:
    """The indices of the GPUs the plan's host has (host.gpus; [] when the plan lists none)."""
    host_gpus = host_section(plan).get("gpus") or []
    if not isinstance(host_gpus, list) or not all(isinstance(g, dict) for g in host_gpus):
        raise RenderError(f"plan host.gpus must be a list of GPU objects, not {host_gpus!r}")
    indices = [g.get("index", i) for i, g in enumerate(host_gpus)]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
        raise RenderError(f"plan host.gpus[].index must be integers, not {indices!r}")
    return indices


def check_gpus_on_host(plan: dict, indices: object, where: str) -> None:
    """GPU indices (already checked as a list of ints) must be GPUs of the plan's host, when it lists any:
    CUDA_VISIBLE_DEVICES naming one it lacks leaves the server no GPU (or another one)."""
    host = host_gpu_indices(plan)
    if host and isinstance(indices, list):
        absent = ", ".join(str(i)[:20] for i in indices if i not in host)
        if absent:
            raise RenderError(
                f"plan {where} names GPU {absent}, which the plan's host does not have (host.gpus: {host})"
            )


def model_section(plan: dict) -> dict:
    return _object_section(plan, "model")


# No count a unit or recipe carries comes near it; a larger one is damage (and overflows float arithmetic)
MAX_PLAN_INT = 2**31 - 1


def shown(value: object) -> str:
    """A plan value in an error message, cut short (a 400-digit number, a long string)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def real_number(value: object) -> bool:
    """An int or finite float of a size a plan can mean (not a bool, NaN, an infinity or 400 digits)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return abs(value) <= MAX_PLAN_INT if isinstance(value, int) else math.isfinite(value)


def require_int(section: dict, key: str, where: str, minimum: int = 0) -> int:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RenderError(f"plan {where}.{key} must be an integer >= {minimum}, got {shown(value)}")
    if value > MAX_PLAN_INT:
        raise RenderError(f"plan {where}.{key} must be at most {MAX_PLAN_INT}, got {shown(value)}")
    return value


def optional_int(section: dict, key: str, where: str, minimum: int = 0) -> int | None:
    if section.get(key) is None:
        return None
    return require_int(section, key, where, minimum)


def require_fraction(section: dict, key: str, where: str) -> float:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise RenderError(f"plan {where}.{key} must be a number in (0, 1], got {value!r}")
    return float(value)


def comment_text(section: dict, key: str, where: str) -> str:
    """A plan value shown in a file's comment line: a newline in it would start a line of its own (an
    EnvironmentFile assignment, a YAML key)."""
    value = section.get(key)
    if value is None:
        return "?"
    if not isinstance(value, str) or any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in value):
        raise RenderError(f"plan {where} must be one line of text, got {repr(value)[:80]}")
    return value


def require_str(section: dict, key: str, where: str) -> str:
    value = section.get(key)
    if not isinstance(value, str) or not value:
        raise RenderError(f"plan {where}.{key} must be a non-empty string, got {value!r}")
    return value


def sft_expert_pools(kt_config: dict) -> object:
    """The NUMA pools kt-kernel 0.7.2 splits an SFT run's experts over: kt_threadpool_count with kt_tp_enabled
    (default false), else one (sft/wrapper.py: `threadpool_count = ... if kt_tp_enabled else 1`). An INT8
    tree loads only when converted over as many (its kt-weight-manifest.json's threadpool_count)."""
    return kt_config.get("kt_threadpool_count", 1) if kt_config.get("kt_tp_enabled") is True else 1
