"""The health check asked a masked or not-found serve unit at sglang's default URL: such a unit has no unit
file systemd reads, so `systemctl show` gives no EnvironmentFile= nor ExecStart= to take its URL from. The
check failed 'http://127.0.0.1:30000/health: URLError <urlopen error [Errno 111] Connection refused>' beside
the units check's own 'masked' / 'no such unit' (or passed on whatever else answered on 30000). Real
testinfra local host and HTTP server; `systemctl` on PATH answers `show` as systemd does for each unit."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")
stopped_instance = importlib.import_module("test_doctor_review3_stopped_instance")
live_port = stopped_instance.live_port


@pytest.fixture
def systemd(tmp_path, monkeypatch):
    """A systemctl whose `show` answers per unit: LoadState for the state query, the env file for
    EnvironmentFiles, nothing for ExecStart (as for a masked or missing unit)."""

    def units(states: dict[str, str], env_files: dict[str, Path]) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        cases = "".join(
            f'  *" {unit}")\n'
            f'    case "$*" in *EnvironmentFiles*) echo "{env_files.get(unit, "")}" ;;\n'
            f"      *ExecStart*) ;;\n"
            f"      *) echo LoadState={state}; echo ActiveState=inactive ;; esac ;;\n"
            for unit, state in states.items()
        )
        tool = bin_dir / "systemctl"
        tool.write_text(f'#!/bin/sh\ncase " $*" in\n{cases}esac\n')
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")

    return units


def _check(units: list[str], sup_dir: Path) -> None:
    host = testinfra.get_host("local://")
    services.test_health_endpoint_answers(
        host, stopped_instance._Config(), units, "systemd", sys.executable, str(sup_dir)
    )


@pytest.mark.parametrize("state", ["masked", "not-found"])
def test_a_unit_without_a_unit_file_is_not_asked(systemd, tmp_path, state):
    systemd({"sglang.service": state}, {})
    with pytest.raises(pytest.skip.Exception) as skipped:
        _check(["sglang.service"], tmp_path)
    said = str(skipped.value)
    assert f"no serve unit to ask (passed over: sglang.service ({state}))" in said, said


def test_a_masked_unit_beside_a_live_one_leaves_the_live_one_asked(systemd, tmp_path, live_port, capsys):
    env = tmp_path / "qwen3.env"
    env.write_text(f"KT_HEALTH_URL=http://127.0.0.1:{live_port}/health\n")
    unit = "ktinfra-serve@qwen3.service"
    systemd({"sglang.service": "masked", unit: "loaded"}, {unit: env})
    _check(["sglang.service", unit], tmp_path)
    out = capsys.readouterr().out
    assert f"health 200 from http://127.0.0.1:{live_port}/health" in out, out
    assert "not asked (no unit file: the units check reports them): sglang.service (masked)" in out, out
