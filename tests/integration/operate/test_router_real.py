"""Two real tiny servers behind a real sglang-router; `ktinfra bench` targets the router."""

from __future__ import annotations

import requests

from ktinfra import bench


def test_router_lists_both_workers_healthy(router_stack):
    router, workers = router_stack
    listed = requests.get(f"{router.url}/workers", timeout=5).json()["workers"]
    assert sorted(w["url"] for w in listed) == sorted(w.url for w in workers)
    assert all(w["is_healthy"] for w in listed)


def test_bench_through_router_spreads_load(router_stack, tiny_model):
    router, workers = router_stack
    before = [w.requests_served() for w in workers]
    sc = bench.Scenario(url=router.url, model=str(tiny_model), prompt_tokens=32, gen_tokens=8, timeout_s=120)
    level = bench.run_level(sc, users=2, requests_per_user=2)
    assert (level["completed"], level["failed"]) == (4, 0), level["errors"]
    assert level["total_output_tokens"] == 4 * 8 and level["ttft_ms"] is not None
    served = [w.requests_served() - b for w, b in zip(workers, before, strict=True)]
    assert served == [2, 2]  # round robin: each worker took half
