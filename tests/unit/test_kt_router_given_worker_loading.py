"""A given worker still loading its model stopped the router's run (9dbdd3d).

kt_router_workers URLs that are no kt_serve instance of the inventory are asked for /health and, with the
workers' key, /get_model_info before the router's files are written. A connection refused there failed the
run and the router was not (re)started, though SGLang opens its port only once its model is loaded
(http_server.py launch_server: _launch_subprocesses, then uvicorn.run), sglang-router adds a worker when it
answers, and an inventory worker that is down does not fail the run. Now only a refused key stops it; a given
worker that does not answer yet is named. Real ansible on localhost (-c local), stand-in SGLang servers."""

from __future__ import annotations

import pytest
from test_kt_router_given_workers_asked import REFUSED, ask, nothing_listens, sglang_like
from test_kt_router_role import _install, _restarts

NOT_YET = (
    "these kt_router_workers (no kt_serve instance of the inventory) do not answer /health from this host yet"
)


def test_a_given_worker_that_does_not_answer_yet_is_named_and_the_run_goes_on(tmp_path):
    loading = nothing_listens()  # its port opens once the model is loaded
    with sglang_like("k3y") as (url, _):
        rc, output = ask(tmp_path, [url, loading], "k3y")
    assert rc == 0, output[-3000:]
    assert REFUSED not in output
    assert f"{NOT_YET}: {loading} (" in output and "Connection refused" in output, output[-3000:]
    assert f"{url} (" not in output.split(NOT_YET)[-1]


def test_a_refused_key_still_stops_the_run_beside_a_worker_that_does_not_answer(tmp_path):
    loading = nothing_listens()
    with sglang_like("its-own") as (url, _):
        rc, output = ask(tmp_path, [loading, url], "k3y")
    assert rc != 0
    refusal = output.split(REFUSED)[-1]
    assert f"{url}: /get_model_info answered 401 to kt_router_worker_api_key" in refusal, output[-3000:]
    assert loading not in refusal.split("the router was not (re)started")[0]


@pytest.mark.slow
def test_the_whole_role_starts_the_router_with_a_given_worker_still_loading(tmp_path):
    """test_a_given_worker_that_does_not_answer_yet_is_named_and_the_run_goes_on covers the defect fast."""
    loading = nothing_listens()
    rc, output = _install(tmp_path, "0.3.2", workers=[loading])
    assert rc == 0, output[-3000:]
    assert f"--worker-urls {loading}" in (tmp_path / "cfg" / "router.env").read_text()
    assert _restarts(tmp_path) == 1
