"""`ktinfra lora serve --start` restarts a running instance whose adapters it wrote anew under the same path.

_install_and_start restarted (systemctl try-restart) only where the unit or env file changed. A re-run with
--overwrite converts a KT adapter again, or replaces the served copy without added_tokens.json, into the path
the instance already loads: the env file stays byte-identical, so the instance kept serving the adapter it
had loaded while the run reported it served the new one. A re-run that keeps the copy as it is still leaves a
running instance alone (no model reload)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_lora import kt_dir, serve_args
from test_lora_cli_errors import invoke
from test_lora_input import COPYING_CONVERTER
from test_lora_served_copy import _base_model, _llamafactory_output, _serve

from ktinfra.commands import lora as lora_cmd


@pytest.fixture
def systemctl(tmp_path, monkeypatch):
    """A root shell on a systemd host whose systemctl calls are recorded (and succeed); units go to tmp."""
    booted, units = tmp_path / "run-systemd", tmp_path / "units"
    booted.mkdir()
    units.mkdir()
    monkeypatch.setattr(lora_cmd, "SYSTEMD_BOOTED", booted)
    monkeypatch.setattr(lora_cmd, "UNIT_DIR", units)
    monkeypatch.setattr(lora_cmd.os, "geteuid", lambda: 0)
    real_which, real_run, calls = lora_cmd.shutil.which, subprocess.run, []

    def which(name, *args, **kwargs):
        return "/usr/bin/systemctl" if name == "systemctl" else real_which(name, *args, **kwargs)

    def run(cmd, *args, **kwargs):
        if cmd[0] != "systemctl":
            return real_run(cmd, *args, **kwargs)
        calls.append(cmd[1])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(lora_cmd.shutil, "which", which)
    monkeypatch.setattr(lora_cmd.subprocess, "run", run)
    return calls


def _start(tmp_path, run: int) -> list[str]:
    return ["--out", str(tmp_path / f"bundle{run}"), "--start", "--env-dir", str(tmp_path / "env")]


def test_a_served_copy_replaced_under_the_same_path_restarts_the_instance(tmp_path, systemctl):
    base, adapter = _base_model(tmp_path / "Qwen3-30B-A3B"), _llamafactory_output(tmp_path / "out")
    result = _serve(base, adapter, *_start(tmp_path, 1))
    assert result.exit_code == 0, result.output
    assert systemctl == ["daemon-reload", "try-restart", "enable"]  # a new env file
    systemctl.clear()
    assert _serve(base, adapter, *_start(tmp_path, 2)).exit_code == 0
    assert systemctl == ["daemon-reload", "enable"]  # the copy kept, nothing changed: no reload
    systemctl.clear()
    config = adapter / "adapter_config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"lora_alpha": 16}))
    result = _serve(base, adapter, *_start(tmp_path, 3), "--overwrite")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out_sglang" / "adapter_config.json").read_text())["lora_alpha"] == 16
    assert systemctl == ["daemon-reload", "try-restart", "enable"]


def test_a_conversion_redone_under_the_same_path_restarts_the_instance(tmp_path, systemctl):
    converter = tmp_path / "converter.py"
    converter.write_text(COPYING_CONVERTER)
    args = serve_args(
        kt_dir(tmp_path / "kt"), "--converter", str(converter), "--converter-python", sys.executable
    )
    result = invoke([*args, *_start(tmp_path, 1)])
    assert result.exit_code == 0, result.output
    systemctl.clear()
    result = invoke([*args, *_start(tmp_path, 2), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert systemctl == ["daemon-reload", "try-restart", "enable"]
