"""kt_router's health waits end without a misleading [ERROR] line. Their uri tasks retry (until) with
failed_when false; when the retries ran out, ansible-core 2.19 marked the task failed and printed
"[ERROR]: Task failed: Action failed: OK" (the router answered 200, its list was not complete yet) above an
"ok", also when the run went on, and above the message of the task that says why when it did not. Real
ansible on localhost (-c local) against the stand-in router and workers of
test_kt_router_wait_workers_answer."""

from __future__ import annotations

from role_play import run_play
from test_kt_router_given_workers_asked import nothing_listens, sglang_like
from test_kt_router_wait_workers_answer import router, wait  # noqa: F401 (router: a fixture)


def test_a_worker_wait_that_runs_out_and_goes_on_prints_no_error(tmp_path, router):  # noqa: F811
    dead = nothing_listens()
    with sglang_like("k3y") as (up, _):
        rc, output = wait(tmp_path, router, {up: 1, dead: None})
    assert rc == 0, output[-3000:]
    assert "routes to 1 of 2 workers; not taken in or not healthy after 3 s" in output, output[-3000:]
    assert "[ERROR]" not in output, output[-3000:]


def test_a_worker_wait_that_fails_the_run_prints_only_its_reason(tmp_path, router):  # noqa: F811
    """kt_router_health_timeout 1 (1 s between checks): two checks of /workers, then the failure."""
    rc, output = wait(tmp_path, router, {nothing_listens(): None}, timeout=1)
    assert rc != 0
    assert output.count("[ERROR]") == 1, output[-3000:]
    reason = output.split("[ERROR]")[1]
    assert "the router answers but has no healthy worker after 1 s" in reason, output[-3000:]


def test_a_router_health_wait_that_runs_out_prints_only_its_reason(tmp_path):
    port = int(nothing_listens().rsplit(":", 1)[1])
    extra = {"kt_router_host": "127.0.0.1", "kt_router_port": port, "kt_router_health_timeout": 5}
    role = {"name": "kt_router", "tasks_from": "health"}
    rc, output = run_play(tmp_path, [{"ansible.builtin.include_role": role}], extra)
    assert rc != 0
    assert output.count("[ERROR]") == 1, output[-3000:]
    assert f"http://127.0.0.1:{port}/health did not answer 200 within 5 s" in output.split("[ERROR]")[1]
