"""kt_router asks the kt_router_workers URLs the inventory does not hold before any change on the host.
Before, it asked them after the router's venv was made and pip had installed sglang-router into it: a given
worker refusing the workers' key failed the run only then. Real ansible on localhost (-c local): the whole
role, with pip from a local stand-in wheel (test_kt_router_role._install) or a venv path under a file."""

from __future__ import annotations

from role_play import run_play
from test_kt_router_given_worker_loading import NOT_YET
from test_kt_router_given_workers_asked import REFUSED, nothing_listens, sglang_like
from test_kt_router_role import _install, _refused_before_any_change

VENV_TASK = "Make the router's virtual environment"


def test_a_given_worker_refusing_the_key_stops_the_run_before_the_venv_and_pip(tmp_path):
    with sglang_like("its-own") as (url, _):
        rc, output = _install(tmp_path, "0.3.2", workers=[url])
    assert rc != 0
    assert REFUSED in output and f"{url}: /get_model_info answered 401" in output, output[-3000:]
    assert VENV_TASK not in output and "Install sglang-router" not in output, output[-3000:]
    assert not (tmp_path / "venv").exists() and not (tmp_path / "cfg").exists()


def test_a_given_worker_that_does_not_answer_is_named_before_the_venv(tmp_path):
    """The run goes on to the venv (which fails here, under a file: no sglang-router download)."""
    fresh, extra = _refused_before_any_change(tmp_path)
    loading = nothing_listens()
    extra["kt_router_workers"] = [loading]
    rc, output = run_play(tmp_path, [{"ansible.builtin.include_role": {"name": "kt_router"}}], extra)
    assert f"{NOT_YET}: {loading} (" in output, output[-3000:]
    assert VENV_TASK in output.split(NOT_YET)[1], output[-3000:]
    assert not fresh.exists()
