"""The serve-units check on an enabled unit systemd could not load (LoadState bad-setting: no ExecStart=;
error: a broken section header) said "sglang-bad.service inactive (dead): not started; systemctl start
sglang-bad.service", and that start is refused ("has a bad unit file setting"). It now says the unit is not
loaded, systemd's reason, and where the line is named (journalctl -u). The states are systemd 252's, read in
the debian12-systemd image. Real testinfra local host; `systemctl` on PATH answers is-enabled and show."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")

SHOWN = {
    "bad-setting": "org.freedesktop.systemd1.BadUnitSetting "
    '"Unit sglang-bad.service has a bad unit file setting."',
    "error": "org.freedesktop.DBus.Error.InconsistentMessage "
    '"Unit sglang-bad.service failed to load properly, please adjust/correct and reload service manager: '
    'Bad message"',
}


@pytest.mark.parametrize("load", ["bad-setting", "error"])
def test_a_unit_systemd_cannot_load_is_not_told_to_start(tmp_path, monkeypatch, load):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "show.txt").write_text(
        f"LoadState={load}\nLoadError={SHOWN[load]}\nActiveState=inactive\nSubState=dead\nResult=success\n"
        "NRestarts=0\n"
    )
    tool = bin_dir / "systemctl"
    show = tmp_path / "show.txt"
    tool.write_text(f'#!/bin/sh\ncase "$1" in is-enabled) echo enabled ;; show) cat {show} ;; esac\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    with pytest.raises(AssertionError) as failed:
        host = testinfra.get_host("local://")
        services.test_units_enabled_and_active(host, ["sglang-bad.service"], "systemd")
    said = str(failed.value).split("\nassert ")[0]
    assert said.startswith(f"sglang-bad.service not loaded ({load}: Unit sglang-bad.service "), said
    assert "journalctl -u sglang-bad.service" in said and "daemon-reload" in said, said
    assert "systemctl start" not in said, said
