"""The host suite's sglang check gave `sglang.launch_server --help` 300 s and, when they ran out, failed with
'sglang.launch_server --help exited 124: ' (timeout's exit status, an empty stderr): nothing said it hung.
Real testinfra local host; the env python is this python with an sglang stand-in whose --help outlasts the
bound."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
envs = importlib.import_module("test_envs")


@pytest.fixture
def hanging_sglang_env(tmp_path, monkeypatch) -> dict:
    site = tmp_path / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (site / "sglang" / "launch_server.py").write_text("import time\ntime.sleep(10)\n")
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    monkeypatch.setattr(envs, "SGLANG_HELP_TIMEOUT", 2, raising=False)
    return {"kind": "inference", "name": "kt-kernel", "python": str(python), "why": "", "given": True}


def test_a_hung_help_says_it_hung(hanging_sglang_env):
    host = testinfra.get_host("local://")
    with pytest.raises(AssertionError) as failed:
        envs.test_sglang_lists_kt_flags(host, hanging_sglang_env)
    python = hanging_sglang_env["python"]
    assert str(failed.value).startswith(
        f"sglang.launch_server --help in {python} did not finish within 2 s (hung:"
    ), str(failed.value)
