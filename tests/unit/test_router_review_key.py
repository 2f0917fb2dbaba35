"""kt_router with a workers' key written as YAML reads it: digits unquoted (an int) or nothing (null), run by
real ansible on localhost (-c local). kt_serve takes an instance's api_key with `| string`, so a key of digits
serves there; the router must send the same key."""

from __future__ import annotations

import threading
from http.server import HTTPServer

import pytest
from role_play import run_play
from test_kt_router_role import Health, _refused_before_any_change
from test_kt_router_settings import router_env

ROLE_TASKS = [{"ansible.builtin.include_role": {"name": "kt_router"}}]
NEEDS_KEY = "and kt_router_worker_api_key when it binds"


def test_a_key_of_digits_passes_the_checks_and_reaches_the_router(tmp_path):
    """Before: `kt_router_worker_api_key: 20240101` passed the argument spec (type str converts it) and the
    run stopped at 'Check there is something to route to': "object of type '_AnsibleTaggedInt' has no
    len()"."""
    _, extra = _refused_before_any_change(tmp_path)
    extra["kt_router_worker_api_key"] = 20240101
    rc, output = run_play(tmp_path, ROLE_TASKS, extra)
    assert "has no len()" not in output, output[-3000:]
    assert "Make the router's virtual environment" in output, output[-3000:]  # past every check
    assert 'KT_ROUTER_API_KEY="20240101"' in router_env(tmp_path, {"kt_router_worker_api_key": 20240101})


def test_the_health_wait_sends_a_key_of_digits(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), Health)
    Health.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        extra = {"kt_router_host": "127.0.0.1", "kt_router_port": server.server_address[1],
                 "kt_router_health_timeout": 5, "kt_router_worker_api_key": 20240101}  # fmt: skip
        tasks = [{"ansible.builtin.include_role": {"name": "kt_router", "tasks_from": "health"}}]
        rc, output = run_play(tmp_path, tasks, extra)
    finally:
        server.shutdown()
        server.server_close()
    assert rc == 0, output[-3000:]
    assert Health.seen == [("/health", "Bearer 20240101")]
    assert "20240101" not in output  # no_log: the request carries the key


@pytest.mark.parametrize(("host", "refused"), [("0.0.0.0", True), ("127.0.0.1", False)])
def test_an_empty_key_is_no_key(tmp_path, host, refused):
    """`kt_router_worker_api_key:` (null). Before: "object of type 'NoneType' has no len()" whatever the bind;
    now no key: refused on a non-loopback bind (sglang-router would serve without a key), taken on loopback,
    where router.env then holds no KT_ROUTER_API_KEY (not the word None)."""
    fresh, extra = _refused_before_any_change(tmp_path)
    extra |= {"kt_router_worker_api_key": None, "kt_router_host": host}
    rc, output = run_play(tmp_path, ROLE_TASKS, extra)
    assert "has no len()" not in output, output[-3000:]
    assert (NEEDS_KEY in output) == refused, output[-3000:]
    assert ("Make the router's virtual environment" in output) != refused, output[-3000:]
    assert not fresh.exists()
    if not refused:
        env = router_env(tmp_path, {"kt_router_worker_api_key": None, "kt_router_host": host})
        assert "KT_ROUTER_API_KEY" not in env and "--api-key" not in env
