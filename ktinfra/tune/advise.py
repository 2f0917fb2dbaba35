"""Turn a parsed SGLang log into parameter recommendations (rules from SGLang's hyperparameter tuning guide).

Every recommendation carries the reason and the log lines that triggered it, so a person can check it.
"""

from __future__ import annotations

import math
from statistics import mean, median

from ktinfra import catalog
from ktinfra.plan.serve import LORA_MIN_RUNNING_REQUESTS
from ktinfra.tune.parse import DECODE_LOG_INTERVAL, OOM_PHASES, ServerLog

MAX_EVIDENCE = 5
USAGE_GOOD = 0.9  # token usage above this means the KV cache is well used
LOW_POOL_USAGE = 0.5  # an uncapped KV pool never used above this has memory GPU experts would use better
LOW_USAGE_SHARE = 0.3  # share of decode lines with low usage + queued requests that counts as "frequent"
RETRACTS_PER_MINUTE_OK = 1.0  # about one retraction a minute is fine
RETRACT_WINDOW_MINUTES = 5  # judged over the busiest 5 minutes, not the whole log
ACTIVATION_GB = (5.0, 8.0)  # free GPU memory to keep for activations and CUDA graphs
QUEUE_HEALTHY = (100, 2000)
IDLE_QUEUE_SHARE = 0.9  # #queue-req == 0 on this share of decode lines ...
IDLE_QUEUE_MIN_LINES = 10  # ... over at least this many lines means the client is too slow
DEFAULT_CONSERVATIVENESS = 1.0  # SGLang's ServerArgs default
DEFAULT_PAGE_SIZE = 1  # SGLang's ServerArgs default


class TuneInputError(ValueError):
    """A bad argument to advise() (--gpu-memory-gb); `ktinfra tune` prints it as one line, exit 1."""


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


# What each server arg must be for the rules to use it. A value that is None (SGLang chooses at start), not
# of that kind (a string, a bool) or out of range counts as unknown: SGLang's default where the rules know
# it, else the rule that needs it goes without (a note in the reason, or no recommendation).
ARG_CHECKS = {
    "schedule_conservativeness": lambda v: _is_number(v) and v > 0,
    "mem_fraction_static": lambda v: _is_number(v) and 0 < v <= 1,
    "chunked_prefill_size": _is_int,  # -1 turns chunked prefill off
    "max_running_requests": lambda v: _is_int(v) and v > 0,
    "cuda_graph_max_bs": lambda v: _is_int(v) and v > 0,
    "kt_num_gpu_experts": lambda v: _is_int(v) and v >= 0,
    "max_total_tokens": lambda v: _is_int(v) and v > 0,
    "page_size": lambda v: _is_int(v) and v > 0,
    "kt_gpu_prefill_token_threshold": lambda v: _is_int(v) and v > 0,
    "kt_gpu_experts_ratio": lambda v: _is_number(v) and 0 <= v <= 1,
    "disable_cuda_graph": lambda v: isinstance(v, bool),
    "disable_cuda_graph_padding": lambda v: isinstance(v, bool),
    "speculative_algorithm": lambda v: isinstance(v, str) and bool(v),
    "enable_lora": lambda v: isinstance(v, bool),
    "kt_lora_path": lambda v: isinstance(v, str) and bool(v),
    "kt_expert_lora_path": lambda v: isinstance(v, str) and bool(v),
    "model_path": lambda v: isinstance(v, str) and bool(v.strip()),
    "decode_log_interval": lambda v: _is_int(v) and v > 0,
}


def _arg(log: ServerLog, key: str):
    """server_args[key] when it is what the rules need, else None (unknown)."""
    value = log.server_args.get(key)
    return value if value is not None and ARG_CHECKS[key](value) else None


def unusable_args(log: ServerLog) -> dict:
    """Tracked server_args whose value is set but not of the kind the rules need (None is "not set")."""
    return {k: v for k, v in log.server_args.items() if v is not None and _arg(log, k) is None}


def _unknown_note(log: ServerLog, key: str) -> str:
    """Why the current value of KEY is unknown, for a reason text."""
    if log.server_args_line is None:
        return "the log has no server_args=ServerArgs(...) line, so the current value is unknown"
    if key not in log.server_args:
        return f"the server_args line has no {key}, so the current value is unknown"
    return f"the server_args line gives {key}={log.server_args[key]!r}, so the current value is unknown"


def check_gpu_memory(gpu_memory_gb) -> float | None:
    """--gpu-memory-gb: None, or a finite number of GB above 0."""
    if gpu_memory_gb is None:
        return None
    if not _is_number(gpu_memory_gb) or gpu_memory_gb <= 0:
        raise TuneInputError(f"--gpu-memory-gb must be a finite number above 0, got {gpu_memory_gb}")
    return float(gpu_memory_gb)


def _rec(parameter: str, current, suggested, reason: str, evidence: list[str], direction: int = 0) -> dict:
    """direction: +1 when the rule raises the value, -1 when it lowers it. A bound of the rule (a floor, a
    clamp) that would leave the value as it is or move it the other way gives advice, not a change."""
    moves = _is_number(current) and _is_number(suggested) and current > 0
    if direction and moves and (suggested - current) * direction <= 0:
        reason += (
            f"; {current:g} is already {'above' if direction > 0 else 'below'} the {suggested:g} this rule "
            f"would {'raise' if direction > 0 else 'lower'} it to, so it suggests no value: see the other "
            "recommendations"
        )
        suggested = None
    return {
        "parameter": parameter,
        "current": current,
        "suggested": suggested,
        "reason": reason,
        "evidence": evidence[:MAX_EVIDENCE],
    }


def _current(log: ServerLog, key: str):
    """Value in force: the scheduler's startup line beats the args dump (it shows auto-chosen values)."""
    if key in log.config:
        return log.config[key]
    return _arg(log, key)


def _retract_rate(log: ServerLog) -> float | None:
    """Retractions per minute in the busiest RETRACT_WINDOW_MINUTES of the log (or the whole log when it is
    shorter). An average over the whole log would hide a burst in a long one: 30 in one minute of a
    4-hour log average 0.125/min; one pair a few hours apart is not a burst."""
    stamps = sorted(ts for _, ts, _ in log.retracts if ts is not None)
    first, last = log.first_ts, log.last_ts
    if len(stamps) < len(log.retracts) or first is None or last is None:
        return None
    window = RETRACT_WINDOW_MINUTES * 60.0
    peak, start = 0, 0
    for end, stamp in enumerate(stamps):
        while (stamp - stamps[start]).total_seconds() >= window:
            start += 1
        peak = max(peak, end - start + 1)
    minutes = max(min((last - first).total_seconds(), window) / 60.0, 1.0)
    return peak / minutes


def _serves_lora(log: ServerLog) -> bool:
    """The server runs LoRA adapters: sglang-kt (and `ktinfra plan`/render) then keep every expert on the CPU
    (kt_ep_wrapper.py) and at least LORA_MIN_RUNNING_REQUESTS running requests (server_args.py)."""
    return any(_arg(log, key) for key in ("enable_lora", "kt_lora_path", "kt_expert_lora_path"))


def _conservativeness(log: ServerLog) -> list[dict]:
    current = _arg(log, "schedule_conservativeness")
    note = ""
    if current is None:
        current = DEFAULT_CONSERVATIVENESS
        if "schedule_conservativeness" in log.server_args:
            raw = log.server_args["schedule_conservativeness"]
            note = f" (schedule_conservativeness={raw!r} in the log is not a number > 0: {current} assumed)"
    rate = _retract_rate(log)
    frequent = (rate is not None and rate > RETRACTS_PER_MINUTE_OK and len(log.retracts) >= 2) or (
        rate is None and len(log.retracts) >= 5
    )
    if frequent:
        how = f"{rate:.1f}/min at the busiest" if rate is not None else f"{len(log.retracts)} times"
        return [
            _rec(
                "--schedule-conservativeness",
                current,
                max(1.3, current),
                f"KV cache pool filled up and requests were retracted {how} (about once a minute is fine): "
                "the scheduler admits too much; make it more conservative" + note,
                [line for line, _, _ in log.retracts],
                direction=+1,
            )
        ]
    cap, below_cap, idle_kv, _ = _queued_with_room(log)
    if (
        below_cap
        and len(idle_kv) >= 3
        and len(idle_kv) / len(below_cap) >= LOW_USAGE_SHARE
        and not log.retracts
    ):
        of = f"{len(below_cap)} decode batches" + (
            f" below the --max-running-requests cap of {cap}" if len(below_cap) < len(log.decodes) else ""
        )
        return [
            _rec(
                "--schedule-conservativeness",
                current,
                min(0.3, current),
                f"{len(idle_kv)} of {of} had token usage < {USAGE_GOOD} "
                "while requests were queued: the scheduler is too conservative" + note,
                [b.line for b in idle_kv],
                direction=-1,
            )
        ]
    return []


def _running_cap(log: ServerLog) -> int | None:
    """The scheduler's max_running_requests (its startup line, else the args dump), when known."""
    cap = _current(log, "max_running_requests")
    return cap if _is_int(cap) and cap > 0 else None


def _is_at_cap(batch, cap: int | None) -> bool:
    """A decode line that ran as many requests as the scheduler's cap allows."""
    return cap is not None and (batch.running_req or 0) >= cap


def _at_running_cap(log: ServerLog) -> list:
    cap = _running_cap(log)
    return [b for b in log.decodes if _is_at_cap(b, cap)]


def _queued_with_room(log: ServerLog):
    """(cap, decode lines below the cap, those of them with KV room (usage < 0.9) and requests queued, lines
    at the cap with KV room and requests queued). At the cap SGLang admits nothing whatever its
    conservativeness (scheduler.py get_num_allocatable_reqs), so those lines say nothing about it."""
    cap = _running_cap(log)
    below_cap, idle_kv, at_cap = [], [], []
    for batch in log.decodes:
        capped = _is_at_cap(batch, cap)
        if not capped:
            below_cap.append(batch)
        if batch.token_usage is not None and batch.token_usage < USAGE_GOOD and (batch.queue_req or 0) > 0:
            (at_cap if capped else idle_kv).append(batch)
    return cap, below_cap, idle_kv, at_cap


def observations(log: ServerLog) -> list[dict]:
    """What the log shows that is no flag change: {"observation", "evidence"}."""
    cap, _, _, at_cap = _queued_with_room(log)
    decodes = log.decodes
    if len(at_cap) < 3 or len(at_cap) / len(decodes) < LOW_USAGE_SHARE:
        return []
    return [
        {
            "observation": (
                f"{len(at_cap)} of {len(decodes)} decode batches ran at the --max-running-requests cap of "
                f"{cap} with token usage < {USAGE_GOOD} while requests were queued: the cap, not the "
                "scheduler's conservativeness or the KV cache, holds requests back. "
                "`ktinfra plan --mode serve` keeps the cap small on purpose (about 2 requests per CPU "
                "core: decode reads the CPU experts); raise it (plan --max-running-requests, or "
                "kt_serve_overrides.max_running_requests) only if the CPU has room, else the queue is "
                "what this load costs"
            ),
            "evidence": [b.line for b in at_cap][:MAX_EVIDENCE],
        }
    ]


def _page(log: ServerLog) -> int:
    return _arg(log, "page_size") or DEFAULT_PAGE_SIZE


def _capped_pool(log: ServerLog) -> int | None:
    """The --max-total-tokens value when it, not --mem-fraction-static, set the KV pool's size."""
    cap, tokens = _arg(log, "max_total_tokens"), log.config.get("max_total_num_tokens")
    if cap is not None and tokens is not None and tokens == cap // _page(log) * _page(log):
        return cap
    return None


def _token_cap(log: ServerLog, cap: int, free: float) -> list[dict]:
    low, high = ACTIVATION_GB
    target = (low + high) / 2
    suggested = None
    reason = (
        f"available_gpu_mem={free:.2f} GB after loading is {'above' if free > high else 'below'} the "
        f"{low:g}-{high:g} GB needed for activations and CUDA graphs, and the KV pool is the {cap} tokens "
        "--max-total-tokens allows (ktinfra sets it for MLA models and to keep the layerwise prefill's MoE "
        "layer out of the pool), so --mem-fraction-static would not "
        "move it: "
    )
    pool = log.kv_pool
    evidence = [line for line in (log.config_line, log.kv_pool_line) if line]
    if free > high and (held := _held_layer(log)):
        reason += "but " + held
    elif pool.get("tokens") and pool.get("gib", 0) > 0:
        per_token, page = pool["gib"] / pool["tokens"], _page(log)
        suggested = max(page, int((cap + (free - target) / per_token) // page * page))
        reason += (
            f"at {per_token * 2**30:,.0f} bytes a token (KV size {pool['gib']:.2f} GB for {pool['tokens']} "
            f"tokens) {'give' if free > high else 'take'} {abs(free - target):.2f} GB "
            f"{'to' if free > high else 'from'} the pool"
        )
    else:
        reason += f"{'raise' if free > high else 'lower'} it; the log has no `KV Cache is allocated` line"
    return [_rec("--max-total-tokens", cap, suggested, reason, evidence, direction=1 if free > high else -1)]


def _held_layer(log: ServerLog) -> str | None:
    """Why memory free after loading may not be free for the pool: the layerwise GPU prefill loads one MoE
    layer's weights at the first long prompt into memory still free at start (`ktinfra plan` keeps it out of
    the pool). None when the server args say it is off."""
    threshold = _arg(log, "kt_gpu_prefill_token_threshold")
    if threshold is not None:
        return (
            f"this server runs layerwise GPU prefill (--kt-gpu-prefill-token-threshold {threshold}): the "
            f"first prompt of {threshold} or more tokens loads one MoE layer's weights into memory that is "
            "free now, which `ktinfra plan` keeps out of the pool; measure after such a prompt, or re-plan, "
            "before giving the pool more"
        )
    if log.server_args_line is None:
        return (
            "the log has no server_args=ServerArgs(...) line, so whether this server runs layerwise GPU "
            "prefill (--kt-gpu-prefill-token-threshold) is unknown; if it does, its first long prompt loads "
            "one MoE layer's weights into memory that is free now: measure after such a prompt first"
        )
    return None


def _mem_fraction(log: ServerLog, gpu_memory_gb: float | None) -> list[dict]:
    free = log.config.get("available_gpu_mem_gb")
    if free is None:
        return []
    current = _arg(log, "mem_fraction_static")
    low, high = ACTIVATION_GB
    if low <= free <= high or (free > high and log.ooms):
        return []  # after an OOM, memory free at start is no memory to give away
    if (cap := _capped_pool(log)) is not None:
        return _token_cap(log, cap, free)
    target = (low + high) / 2
    suggested = None
    if current is not None:
        if gpu_memory_gb:
            step = (free - target) / gpu_memory_gb
        else:
            step = 0.02 if free > high else -0.03  # without the GPU size, move in small steps
        suggested = round(min(0.95, max(0.5, current + step)), 2)
    if free > high:
        reason = (
            f"available_gpu_mem={free:.2f} GB after loading is above the {low:g}-{high:g} GB needed for "
            "activations and CUDA graphs: give the rest to the KV cache pool"
        )
    else:
        reason = (
            f"available_gpu_mem={free:.2f} GB after loading is below the {low:g}-{high:g} GB needed for "
            "activations and CUDA graphs: expect OOM under load, shrink the static pool"
        )
    held = _held_layer(log) if free > high else None
    if held and _arg(log, "kt_gpu_prefill_token_threshold") is not None:
        suggested = None  # the free memory is the held layer's until a long prompt has been served
        reason += f", but {held}"
    else:
        if suggested is None:
            way = "raise" if free > high else "lower"
            reason += (
                f"; {_unknown_note(log, 'mem_fraction_static')}: "
                f"{way} it a little (0.02-0.03) from what the server runs with"
            )
        if held:  # no server_args line: layerwise prefill unknown
            reason += f"; {held}"
    direction = 1 if free > high else -1
    return [_rec("--mem-fraction-static", current, suggested, reason, [log.config_line], direction)]


def _next_chunk(current: int | None) -> int:
    if current is None or current <= 0 or current > 4096:  # unknown, or chunking off (-1): turn it on
        return 4096
    if current > 2048:
        return 2048
    return max(512, current // 2)


def _oom(log: ServerLog) -> list[dict]:
    recs = []
    prefill = [o for o in log.ooms if o.phase == "prefill"]
    decode = [o for o in log.ooms if o.phase == "decode"]
    slots = [o for o in log.ooms if o.phase == "req_slots"]
    unknown = [o for o in log.ooms if o.phase == "unknown"]
    if prefill:
        current = _current(log, "chunked_prefill_size")
        recs.append(
            _rec(
                "--chunked-prefill-size",
                current,
                _next_chunk(current),
                f"{len(prefill)} out-of-memory error(s) during prefill: smaller prefill chunks need less "
                "memory (long prompts prefill slower)",
                [o.line for o in prefill],
                direction=-1,
            )
        )
    if decode or slots:
        current = _current(log, "max_running_requests")
        peak = log.running_req_peak or 0
        # what ran, not a cap it never reached: SGLang derives its own (4096 from a large pool), and halving
        # that changes nothing for a server that ran out of memory at 48
        base = min((n for n in (current, peak) if _is_int(n) and n > 0), default=0)
        what = [f"{len(decode)} out-of-memory error(s) during decode"] if decode else []
        if slots:
            what.append(f"{len(slots)} time(s) the request slots ran out (alloc_req_slots)")
        least = LORA_MIN_RUNNING_REQUESTS if _serves_lora(log) else 1
        below = f", below the cap of {current}" if _is_int(current) and 0 < peak < current else ""
        reason = (
            f"{' and '.join(what)} (peak #running-req {peak}{below}): halve the number of requests decoded "
            f"at once; {sampled_peak(log)}"
        )
        suggested = max(least, base // 2) if base else None
        if least > 1 and suggested is not None and suggested >= base:
            reason += (
                f"; but this server runs LoRA, which sglang-kt serves with at least {least} running requests "
                "(ktinfra plan's bound), so it suggests no value: see the other recommendations"
            )
            suggested = None
        elif least > 1 and suggested == least:
            reason += f" (not below {least}: sglang-kt serves LoRA with at least {least})"
        recs.append(
            _rec("--max-running-requests", current, suggested, reason, [o.line for o in decode + slots], -1)
        )
    experts = _current(log, "kt_num_gpu_experts")
    # any ratio, 0.0 included (every expert on the CPU), makes sglang-kt ignore the count
    counted = _ratio(log) is None
    if log.ooms and _is_int(experts) and experts > 0 and _capped_pool(log) is not None and counted:
        recs.append(
            _rec(
                "--kt-num-gpu-experts",
                experts,
                experts // 2,
                "GPU ran out of memory, some MoE experts sit on the GPU and --max-total-tokens caps the KV "
                "pool: moving half of the experts back to the CPU (kt-kernel) leaves that VRAM free for "
                "activations (without the cap SGLang would size the pool into it)",
                [o.line for o in (prefill + decode + slots + unknown)],
                direction=-1,
            )
        )
    ratio = _ratio(log)
    if log.ooms and _is_number(ratio) and ratio > 0 and _capped_pool(log) is not None:
        reason = (
            f"GPU ran out of memory, {_ratio_on_gpu(ratio)} and --max-total-tokens caps the KV pool: "
            "halving the ratio moves half of them back to the CPU (kt-kernel) and leaves that VRAM free for "
            "activations"
        )
        recs.append(_halved_ratio(ratio, reason, [o.line for o in prefill + decode + slots + unknown]))
    recs += _graph_capture_oom(log)
    if unknown and not prefill and not decode:
        reason = "GPU out of memory outside a recognisable prefill/decode step: lower the static pool"
        recs.append(_lower_static_pool(log, reason, unknown))
    return recs


def _lower_static_pool(log: ServerLog, reason: str, ooms: list) -> dict:
    """--mem-fraction-static 0.05 lower (not below 0.5) for these OOMs; advice when the current is unknown."""
    current = _arg(log, "mem_fraction_static")
    if current is None:
        reason += f"; {_unknown_note(log, 'mem_fraction_static')}: lower it by about 0.05"
    suggested = round(max(0.5, current - 0.05), 2) if current is not None else None
    return _rec("--mem-fraction-static", current, suggested, reason, [o.line for o in ooms], direction=-1)


def _graph_capture_oom(log: ServerLog) -> list[dict]:
    """SGLang captures its CUDA graphs at start in what --mem-fraction-static left after the KV pool
    ("Capture cuda graph failed: CUDA out of memory"). Its traceback runs the attention backend's
    forward_decode, which read as a decode OOM: halving --max-running-requests did not shrink the graphs."""
    graphs = [o for o in log.ooms if o.phase == "cuda_graph"]
    if not graphs:
        return []
    reason = (
        f"{len(graphs)} out-of-memory error(s) while capturing CUDA graphs at start, in the memory the KV "
        "pool left: lower the static pool so the graphs fit (the KV pool shrinks)"
    )
    top = _current(log, "cuda_graph_max_bs") or max(log.capture_bs, default=None)
    if _is_int(top) and top > 1:
        reason += (
            f"; or capture smaller graphs, --cuda-graph-max-bs {top // 2} (decode batches above it then run "
            "without CUDA graphs)"
        )
    return [_lower_static_pool(log, reason, graphs)]


# the plan has no --kt-gpu-experts-ratio key (ANSIBLE_KEYS): a ratio change is made where the ratio is given
RATIO_NOT_WRITTEN = "--ansible-vars does not write it: the plan has no ratio; change it where it is given"
NO_POOL_FRACTION_ROOM = 0.85  # below this --mem-fraction-static can still grow by 0.05 for the pool


def _ratio_on_gpu(ratio: float) -> str:
    return (
        f"--kt-gpu-experts-ratio {ratio:g} puts that share of the MoE experts on the GPU (sglang-kt then "
        "ignores --kt-num-gpu-experts)"
    )


def _halved_ratio(ratio: float, reason: str, evidence: list[str]) -> dict:
    """Halve --kt-gpu-experts-ratio, which the plan (and so --ansible-vars) does not hold."""
    reason = f"{reason} ({RATIO_NOT_WRITTEN})"
    return _rec("--kt-gpu-experts-ratio", ratio, round(ratio / 2, 4), reason, evidence, -1)


def _startup(log: ServerLog) -> list[dict]:
    """A server that never started: its weights ran out of GPU memory while loading, or left none for the KV
    pool ("Not enough memory. Please try to increase --mem-fraction-static"). Without this the log of a
    crash-looping unit read "no SGLang scheduler lines found", and a weights OOM was taken for a pool one
    (lower --mem-fraction-static, which SGLang applies only after the weights are in)."""
    load = [o for o in log.ooms if o.phase == "load"]
    experts = _current(log, "kt_num_gpu_experts")
    ratio = _ratio(log)
    has_experts = _is_int(experts) and experts > 0 and ratio is None
    recs = []
    if load:
        reason = (
            f"{len(load)} out-of-memory error(s) while loading the weights, before any KV pool or prefill "
            "(--mem-fraction-static and --chunked-prefill-size do not apply yet): the weights do not fit"
        )
        if ratio is not None and ratio > 0:
            reason += f": {_ratio_on_gpu(ratio)}, halving it moves half of them back to the CPU (kt-kernel)"
            recs.append(_halved_ratio(ratio, reason, [o.line for o in load]))
        elif has_experts:
            reason += ": move half of the GPU experts back to the CPU (kt-kernel)"
            recs.append(
                _rec("--kt-num-gpu-experts", experts, experts // 2, reason, [o.line for o in load], -1)
            )
        else:
            reason += (
                "; with no GPU experts to move (or their count unknown: "
                f"{_unknown_note(log, 'kt_num_gpu_experts')}) the model needs a smaller weight format or "
                "more GPUs"
                if not _is_int(experts)
                else "; with no GPU experts to move the model needs a smaller weight format or more GPUs"
            )
            if ratio == 0:
                reason += " (--kt-gpu-experts-ratio 0 keeps every expert on the CPU already)"
            recs.append(_rec("--kt-num-gpu-experts", experts, None, reason, [o.line for o in load]))
    if log.no_pool:
        current = _arg(log, "mem_fraction_static")
        reason = (
            "the server stopped at start: after the weights no GPU memory was left for the KV cache pool "
            "(SGLang: increase --mem-fraction-static)"
        )
        if current is not None and current < NO_POOL_FRACTION_ROOM:
            recs.append(
                _rec("--mem-fraction-static", current, round(current + 0.05, 2), reason, log.no_pool, +1)
            )
        elif has_experts:
            reason += (
                f"; --mem-fraction-static {current:g} leaves little for activations already, so free the "
                "memory the GPU experts' weights take: move half of them back to the CPU (kt-kernel)"
                if current is not None
                else f"; {_unknown_note(log, 'mem_fraction_static')}: free the memory the GPU experts' "
                "weights take instead, move half of them back to the CPU (kt-kernel)"
            )
            recs.append(_rec("--kt-num-gpu-experts", experts, experts // 2, reason, log.no_pool, -1))
        elif ratio is not None and ratio > 0:
            reason += (
                f"; --mem-fraction-static {current:g} leaves little for activations already"
                if current is not None
                else f"; {_unknown_note(log, 'mem_fraction_static')}"
            )
            reason += f": {_ratio_on_gpu(ratio)}, halving it frees the memory of half of them (kt-kernel)"
            recs.append(_halved_ratio(ratio, reason, log.no_pool))
        else:
            suggested = round(min(0.95, current + 0.03), 2) if current is not None else None
            if current is None:
                reason += f"; {_unknown_note(log, 'mem_fraction_static')}: raise it a little"
            recs.append(_rec("--mem-fraction-static", current, suggested, reason, log.no_pool, +1))
    return recs


def _ratio(log: ServerLog):
    """--kt-gpu-experts-ratio when set: sglang-kt then ignores --kt-num-gpu-experts (kt_ep_wrapper.py)."""
    return _arg(log, "kt_gpu_experts_ratio")


def _experts_per_layer(log: ServerLog) -> int | None:
    """The served model's routed experts per MoE layer, the most --kt-num-gpu-experts places (sglang-kt
    multiplies it by the MoE layers): from model_path's config.json when it is readable here, else from the
    catalog entry named like its folder (tune may read a log away from the host); None when unknown."""
    model_path = _arg(log, "model_path")
    if model_path is None:
        return None
    for model in (model_path, model_path.rstrip("/").rsplit("/", 1)[-1]):
        try:
            return catalog.resolve(model).num_experts
        except (ValueError, OSError):  # UnknownModelError, ModelConfigError, an unreadable folder
            continue
    return None


def _spare_vram_experts(log: ServerLog) -> list[dict]:
    """More GPU experts when the log shows memory they could use. SGLang sizes the KV pool from what is free
    after the weights (GPU experts included) minus total x (1 - mem_fraction_static), so without a
    --max-total-tokens cap more experts shrink the pool and leave available_gpu_mem as it is: then the
    sign is a pool that never fills, not free memory."""
    free = log.config.get("available_gpu_mem_gb")
    experts = _current(log, "kt_num_gpu_experts")
    usage = [b.token_usage for b in log.decodes if b.token_usage is not None]
    if not _is_int(experts) or log.ooms or (usage and max(usage) >= USAGE_GOOD):
        return []  # an OOM, or the KV cache is the bottleneck: spare memory belongs to the pool
    if _serves_lora(log):
        return []  # sglang-kt serves LoRA with every expert on the CPU (kt_ep_wrapper.py refuses GPU experts)
    if (ratio := _ratio(log)) is not None:
        return [
            _rec(
                "--kt-num-gpu-experts",
                experts,
                None,
                f"the KV cache never filled, but --kt-gpu-experts-ratio {ratio:g} is set and sglang-kt then "
                "ignores --kt-num-gpu-experts: raise the ratio to put more experts on the GPU",
                [log.server_args_line or ""],
            )
        ]
    if _capped_pool(log) is not None:
        if free is None or free <= 2 * ACTIVATION_GB[1] or _held_layer(log):
            return []  # not far above what activations need, or held for the layerwise prefill's MoE layer
        reason = (
            f"available_gpu_mem={free:.2f} GB is far above what activations need, --max-total-tokens caps "
            f"the KV pool and it never filled (max token usage {max(usage, default=0):.2f}): put more "
            "experts on the GPU; raise in steps and keep available_gpu_mem >= 5 GB"
        )
        evidence = [log.config_line]
    elif usage and len(full := _at_running_cap(log)) >= 3 and max(usage) < LOW_POOL_USAGE:
        # only at the cap is low usage the pool's size and not a light load (an idle client fills nothing)
        reason = (
            f"{len(full)} decode batches ran at the --max-running-requests cap of {_running_cap(log)} and "
            f"the KV pool never went above {max(usage):.2f} token usage: the cap cannot use the pool, GPU "
            "experts would use its memory better. SGLang sizes the pool after the weights, so each expert "
            "comes out of the pool (available_gpu_mem stays as it is): raise in steps and watch token usage "
            "and max_total_num_tokens at the next start"
        )
        evidence = [line for line in (log.config_line, log.kv_pool_line) if line] + [b.line for b in full]
    else:
        return []
    per_layer = _experts_per_layer(log)
    if per_layer is not None and experts >= per_layer:
        return []  # every expert is on the GPU already: the spare memory is the pool's
    suggested = max(1, experts * 2)
    if per_layer is not None and suggested > per_layer:
        suggested = per_layer
        reason += f" (not above {per_layer}: the model has {per_layer} experts per MoE layer)"
    return [_rec("--kt-num-gpu-experts", experts, suggested, reason, evidence, direction=+1)]


def _cuda_graph(log: ServerLog) -> list[dict]:
    if _arg(log, "disable_cuda_graph") or log.graph_off_line:
        return []  # off on purpose (KT LoRA, --disable-cuda-graph): a larger capture size changes nothing
    decodes = [b for b in log.decodes if b.graph is not None and (b.running_req or 0) > 0]
    no_graph = [b for b in decodes if b.graph is False]
    if not decodes or len(no_graph) / len(decodes) < 0.2:
        return []
    current = _arg(log, "cuda_graph_max_bs") or (max(log.capture_bs) if log.capture_bs else None)
    peak = max(b.running_req or 0 for b in no_graph)
    if current is not None and peak <= current:
        return []  # graphs are off for another reason (e.g. --disable-cuda-graph)
    suggested = min(768, 2 ** math.ceil(math.log2(max(peak, 1))))
    reason = (
        f"{len(no_graph)} of {len(decodes)} decode batches ran without CUDA graph at up to {peak} running "
        "requests: capture graphs for larger batches (costs some memory; lower --mem-fraction-static "
        "slightly if needed)"
    )
    # no batch runs more requests than the scheduler's cap: a graph above it is memory for nothing
    if (cap := _running_cap(log)) is not None and suggested > cap:
        sizes = _capture_sizes(log)
        suggested = min((size for size in sizes if size >= cap), default=cap)
        if suggested == cap:
            reason += f" (not above {cap}: --max-running-requests caps the batch)"
        else:
            below = max(size for size in sizes if size < cap)
            reason += (
                f" ({suggested}, not {cap}: --max-running-requests caps the batch at {cap}, but SGLang "
                "captures only the sizes of its list up to --cuda-graph-max-bs, and adds the cap itself only "
                f"when that list goes past it; {cap} would stop at {below}, batches of {below + 1} to {cap} "
                "without a graph)"
            )
    evidence = ([log.capture_line] if log.capture_line else []) + [b.line for b in no_graph]
    return [_rec("--cuda-graph-max-bs", current, suggested, reason, evidence, direction=+1)]


def _capture_sizes(log: ServerLog, largest: int = 4096) -> list[int]:
    """The batch sizes SGLang captures graphs for up to --cuda-graph-max-bs LARGEST (server_args.py
    _generate_cuda_graph_batch_sizes); cuda_graph_runner adds the request pool's size (max_running_requests)
    when the largest of them is above it."""
    if _arg(log, "disable_cuda_graph_padding"):
        return list(range(1, largest + 1))
    if _arg(log, "speculative_algorithm"):
        head = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8)]
        return head + list(range(272, largest + 1, 16))
    head = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16)]
    return head + list(range(512, largest + 1, 32))


def _request_rate(log: ServerLog) -> list[dict]:
    queues = [b for b in log.decodes if b.queue_req is not None]
    if not queues:
        return []
    values = [b.queue_req for b in queues]
    idle = [b for b in queues if b.queue_req == 0]
    if len(queues) >= IDLE_QUEUE_MIN_LINES and len(idle) / len(queues) >= IDLE_QUEUE_SHARE:
        return [
            _rec(
                "request rate (client)",
                f"#queue-req median {median(values):g}",
                f"#queue-req {QUEUE_HEALTHY[0]}-{QUEUE_HEALTHY[1]}",
                f"#queue-req stayed 0 on {len(idle)} of {len(queues)} decode batches: the client sends too "
                "slowly to keep the server busy; raise concurrency or request rate",
                [b.line for b in idle],
            )
        ]
    flooded = [b for b in queues if b.queue_req > QUEUE_HEALTHY[1]]
    if flooded and len(flooded) / len(queues) >= LOW_USAGE_SHARE:
        return [
            _rec(
                "request rate (client)",
                f"#queue-req max {max(values)}",
                f"#queue-req {QUEUE_HEALTHY[0]}-{QUEUE_HEALTHY[1]}",
                f"#queue-req exceeded {QUEUE_HEALTHY[1]} on {len(flooded)} decode batches: the queue adds "
                "scheduling overhead; send requests more slowly",
                [b.line for b in flooded],
            )
        ]
    return []


POOL_FLAGS = ("--mem-fraction-static", "--max-total-tokens")


def _raises(rec: dict) -> bool:
    current, suggested = rec["current"], rec["suggested"]
    return _is_number(current) and _is_number(suggested) and suggested > current


def sampled_peak(log: ServerLog) -> str:
    return (
        "the peak is sampled: SGLang logs every prefill batch but a decode batch only every "
        f"{_arg(log, 'decode_log_interval') or DECODE_LOG_INTERVAL} iterations (--decode-log-interval), so "
        "more may have run between lines"
    )


def summarize(log: ServerLog) -> dict:
    decodes = log.decodes
    usage = [b.token_usage for b in decodes if b.token_usage is not None]
    queue = [b.queue_req for b in decodes if b.queue_req is not None]
    throughput = [b.gen_throughput for b in decodes if b.gen_throughput is not None]
    first, last = log.first_ts, log.last_ts
    return {
        "lines_read": log.lines_read,
        "decode_batches": len(decodes),
        "prefill_batches": len(log.batches) - len(decodes),
        "retractions": len(log.retracts),
        "oom_errors": {phase: sum(1 for o in log.ooms if o.phase == phase) for phase in OOM_PHASES},
        "no_kv_pool": len(log.no_pool),
        "token_usage": {"mean": round(mean(usage), 3), "max": max(usage)} if usage else None,
        "queue_req": {"median": median(queue), "max": max(queue)} if queue else None,
        "running_req_max": log.running_req_peak,
        "running_req_max_note": sampled_peak(log) if log.running_req_peak is not None else None,
        "gen_throughput_tok_s": {"mean": round(mean(throughput), 2), "max": max(throughput)}
        if throughput
        else None,
        "earlier_runs_ignored": log.earlier_runs,
        "earlier_runs_carried": log.earlier_runs_carried,
        "startup": log.config or None,
        "kv_pool": log.kv_pool or None,
        "server_args": log.server_args or None,
        "span_seconds": (last - first).total_seconds() if first and last else None,
        "observations": observations(log),
    }


def advise(log: ServerLog, gpu_memory_gb: float | None = None) -> dict:
    gpu_memory_gb = check_gpu_memory(gpu_memory_gb)
    recs = (
        _startup(log)
        + _conservativeness(log)
        + _oom(log)
        + _mem_fraction(log, gpu_memory_gb)
        + _spare_vram_experts(log)
        + _cuda_graph(log)
        + _request_rate(log)
    )
    if any(r["parameter"] == "--kt-num-gpu-experts" and _raises(r) for r in recs):
        # the pool never filled, so the spare memory goes to experts; growing the pool too claims it twice
        recs = [r for r in recs if not (r["parameter"] in POOL_FLAGS and _raises(r))]
    # One recommendation per parameter: OOM fixes come first and win over capacity tweaks.
    seen, unique = set(), []
    for rec in recs:
        if rec["parameter"] not in seen:
            seen.add(rec["parameter"])
            unique.append(rec)
    # A rule that cannot name a value (the log lacks the current one) is advice, not a change to make.
    changes = [r for r in unique if r["suggested"] is not None]
    advice = [r for r in unique if r["suggested"] is None]
    summary = summarize(log)
    if not log.batches and not log.config and not log.ooms and not log.retracts and not log.no_pool:
        message = "no SGLang scheduler lines found in this log"
    elif not unique:
        message = "nothing to fix: no rule fired on this log"
    else:
        client = sum(1 for r in changes if not r["parameter"].startswith("--"))
        parts = [f"{len(changes) - client} change(s) recommended"]
        if client:
            parts.append(f"{client} for the client (request rate), not the server")
        if advice:
            parts.append(f"{len(advice)} note(s) without a value to suggest (see advice)")
        message = "; ".join(parts)
    if summary["observations"]:
        message += f"; {len(summary['observations'])} observation(s), no change (see observations)"
    if bad := unusable_args(log):
        listed = ", ".join(f"{k}={v!r}" for k, v in sorted(bad.items()))
        message += f"; server_args value(s) not usable, taken as unknown: {listed}"
    if log.earlier_runs_carried:
        ignored = f"; {log.earlier_runs} earlier run(s) with other args ignored" if log.earlier_runs else ""
        message += (
            f" (last server start and {log.earlier_runs_carried} earlier run(s) with the same server args "
            f"counted, as restarts of one configuration{ignored})"
        )
    elif log.earlier_runs:
        message += f" (last server start only: {log.earlier_runs} earlier run(s) in this log ignored)"
    summary["message"] = message
    return {"recommendations": changes, "advice": advice, "summary": summary}
