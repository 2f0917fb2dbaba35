"""sglang-router's --health-check-timeout-secs, kt_router_health_check_timeout, was 5 (sglang-router 0.3.2's
own default): its health checker asks each worker's /health with that timeout and marks a worker unhealthy
after 3 failures in a row (sgl-model-gateway src/core/worker.rs http_health_check, check_health_async), and
takes a worker in with the same timeout (src/core/steps/worker/local/detect_connection.rs). SGLang's /health
generates one token and answers when the scheduler does, after up to SGLANG_HEALTH_CHECK_TIMEOUT, 20 s
(python/sglang/srt/entrypoints/http_server.py health_generate), so a KT worker busy with a long CPU prefill
was taken out of the routing. The default is now 25 (20 s, its 1 s polling and slack), as
kt_router_worker_probe_timeout. router.env.j2 rendered with the role's vars (test_kt_router_settings)."""

from __future__ import annotations

from test_kt_router_settings import router_env


def _timeout_given(tmp_path, extra: dict) -> str:
    lines = router_env(tmp_path, extra).splitlines()
    words = next(line for line in lines if line.startswith("KT_ROUTER_ARGS=")).split('"')[1].split()
    return words[words.index("--health-check-timeout-secs") + 1]


def test_the_router_waits_25_s_for_a_workers_health_by_default(tmp_path):
    assert _timeout_given(tmp_path, {}) == "25"


def test_a_given_health_check_timeout_reaches_the_router(tmp_path):
    assert _timeout_given(tmp_path, {"kt_router_health_check_timeout": 40}) == "40"
