"""Two real tiny servers behind a real sglang-router; `ktinfra bench` targets the router."""

from __future__ import annotations

import re

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


SGLANG_ONLY_FIELDS = {
    "no_stop_trim", "ignore_eos", "continue_final_message", "skip_special_tokens",
    "separate_reasoning", "stream_reasoning", "return_hidden_states",
}  # fmt: skip


def test_unmodified_transformers_serve_behind_the_router_still_needs_lenient_serve(
    tiny_server, tiny_model, launch_router, tmp_path
):
    """Why the router's workers run lenient_serve.py: if a router or transformers update stops this 422, the
    workers can run the unmodified `transformers serve` (this test then fails and says so)."""
    body = {"model": str(tiny_model), "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    assert requests.post(f"{tiny_server.url}/v1/chat/completions", json=body, timeout=60).status_code == 200
    with launch_router([tiny_server.url], tmp_path / "router.log") as url:
        resp = requests.post(f"{url}/v1/chat/completions", json=body, timeout=60)
    assert resp.status_code == 422, "the router no longer adds SGLang-only fields: drop lenient_serve.py"
    rejected = set(re.findall(r"'([a-z_]+)'", resp.json()["detail"]))
    assert rejected == SGLANG_ONLY_FIELDS
