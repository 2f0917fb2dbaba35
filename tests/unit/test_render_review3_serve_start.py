"""`render serve` inputs that gave a unit which could never serve: a non-root --user on a port below 1024
(bind fails with EACCES, every restart the same) and an --extra-arg of argparse's help (the server prints it
and exits 0, which Restart=on-failure never retries). Both are refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_render_support import load_fixture_plan
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.render import RenderError, render_serve

PLAN = Path(__file__).resolve().parents[1] / "fixtures" / "plans" / "seed002-qwen3-30b-a3b-serve.json"
MODEL = "/root/autodl-tmp/Qwen3-30B-A3B"
WEIGHTS = "/root/autodl-tmp/Qwen3-30B-A3B-INT8/"


def _render(**kwargs):
    plan = load_fixture_plan(PLAN.name)
    return render_serve(plan, name="q", model_path=MODEL, weight_path=WEIGHTS, host="127.0.0.1", **kwargs)


@pytest.mark.parametrize("user", ["alice", "1000"])
def test_a_non_root_user_on_a_privileged_port_is_refused(user):
    with pytest.raises(RenderError, match=rf"--user {user} cannot bind port 80: ports below 1024 need root"):
        _render(user=user, port=80)


@pytest.mark.parametrize(("user", "port"), [("alice", 1024), ("root", 80), ("0", 443), (None, 80)])
def test_root_or_an_unprivileged_port_still_renders(user, port):
    rendered = _render(user=user, port=port)
    assert f"--port {port}" in rendered.files["ktinfra-serve-q.env"][0]


def test_the_cli_refuses_it_before_writing_the_bundle(tmp_path):
    out = tmp_path / "bundle"
    args = ["render", "serve", "--plan", str(PLAN), "--name", "q", "--model-path", MODEL]
    args += [
        "--weight-path",
        WEIGHTS,
        "--host",
        "127.0.0.1",
        "--port",
        "80",
        "--user",
        "alice",
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "cannot bind port 80" in result.output
    assert not out.exists()


@pytest.mark.parametrize("arg", ["-h", "--help", "--hel", "--he", "--help=1"])
def test_help_as_an_extra_arg_is_refused(arg):
    with pytest.raises(RenderError, match="would print its help and exit"):
        _render(extra_args=[arg])


@pytest.mark.parametrize("arg", ["--watchdog-timeout=600", "-v", "--log-level=debug"])
def test_other_extra_args_still_pass(arg):
    assert arg in _render(extra_args=[arg]).info["argv"]
