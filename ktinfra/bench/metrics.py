"""bench_serving-style metrics over a set of request results."""

from __future__ import annotations

import math
from collections import Counter
from statistics import mean, median

from ktinfra.bench.client import RequestResult


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def distribution(values: list[float], scale: float = 1.0) -> dict | None:
    if not values:
        return None
    scaled = [v * scale for v in values]
    return {
        "mean": round(mean(scaled), 3),
        "median": round(median(scaled), 3),
        "p95": round(percentile(scaled, 95), 3),
        "p99": round(percentile(scaled, 99), 3),
    }


def _floor2(value: float) -> float:
    """`value` rounded down to 2 decimals (the 1e-9 keeps 0.29, stored as 0.28999..., at 0.29)."""
    return math.floor(value * 100 + 1e-9) / 100


def summarize(results: list[RequestResult], concurrency: int, wall_s: float) -> dict:
    done = [r for r in results if r.ok]
    tpot = [
        (r.latency_s - r.ttft_s) / (r.output_tokens - 1)
        for r in done
        if r.ttft_s is not None and r.output_tokens > 1 and r.itl_s
    ]
    itl = [x for r in done for x in r.itl_s]
    user_tps = [r.user_tps for r in done]
    # the most frequent first: sorted by text, 5 rare errors whose text sorts first ("HTTP 500: ...") hid
    # the one that failed most of the level ("timed out ...")
    counts = Counter(r.error for r in results if r.error)
    errors = sorted(counts, key=lambda error: (-counts[error], error))
    return {
        "concurrency": concurrency,
        "completed": len(done),
        "failed": sum(1 for r in results if not r.ok and not r.cut),
        # still running when a --duration level and its grace ended: cut by the bench, neither completed
        # nor failed, and none of their tokens counted
        "cut": sum(1 for r in results if r.cut),
        "errors": errors[:5],
        "error_counts": [counts[error] for error in errors[:5]],  # how many requests failed with each
        "other_errors": sum(counts[error] for error in errors[5:]),  # failed requests with errors not shown
        # 200 replies that were not the API's (an HTML page, JSON without choices): --url or --api is wrong
        "unexpected_replies": sum(1 for r in results if r.bad_reply),
        "duration_s": round(wall_s, 3),
        "total_input_tokens": sum(r.prompt_tokens for r in done),
        "total_output_tokens": sum(r.output_tokens for r in done),
        # completed requests the server sent no usage for: their output tokens are counted from the reply
        "output_tokens_estimated": sum(1 for r in done if r.tokens_estimated),
        # completed requests without usage.prompt_tokens: their input is the requested length in words
        "input_tokens_estimated": sum(1 for r in done if r.prompt_estimated),
        "request_throughput": round(len(done) / wall_s, 4) if wall_s > 0 else 0.0,
        "input_throughput": round(sum(r.prompt_tokens for r in done) / wall_s, 2) if wall_s > 0 else 0.0,
        "output_throughput": round(sum(r.output_tokens for r in done) / wall_s, 2) if wall_s > 0 else 0.0,
        "ttft_ms": distribution([r.ttft_s for r in done if r.ttft_s is not None], 1000.0),
        "tpot_ms": distribution(tpot, 1000.0),
        "itl_ms": distribution(itl, 1000.0),
        "e2e_latency_ms": distribution([r.latency_s for r in done], 1000.0),
        "user_tps": {
            # rounded down for the table: 19.996 must not show as 20 beside a --min-tps 20 it failed
            "min": _floor2(min(user_tps)),
            # what the capacity search compares with --min-tps: rounded, 19.998 failed a target of 19.995
            "min_exact": min(user_tps),
            "median": round(median(user_tps), 2),
            "mean": round(mean(user_tps), 2),
        }
        if user_tps
        else None,
    }


def slowest_user_tps(tps: dict) -> float | None:
    """A level's slowest user's tok/s as --min-tps is compared with it: unrounded (min_exact), or the rounded
    min of a level summarised without it."""
    return tps.get("min_exact", tps["min"])
