"""`systemctl is-enabled` exits 0 on 'static' (a unit without an [Install] section), so the serve-units check
passed a hand-made sglang.service that had been started by hand and that nothing starts at boot ("units
enabled and active"): after a reboot the server was down. A static unit that no unit wants, requires,
upholds, binds or triggers is now reported; one another unit pulls in (systemd 252 shows it in WantedBy=
etc., read in the debian12-systemd image) passes as before. Real testinfra local host; `systemctl` on PATH
answers is-enabled and show."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


@pytest.fixture
def static_unit(tmp_path, monkeypatch):
    def shows(pulled_by: dict[str, str]) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        show = tmp_path / "show.txt"
        props = {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "Result": "success"}
        names = ("WantedBy", "RequiredBy", "UpheldBy", "BoundBy", "TriggeredBy")
        props |= {name: pulled_by.get(name, "") for name in names}
        show.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        tool = bin_dir / "systemctl"
        tool.write_text(f'#!/bin/sh\ncase "$1" in is-enabled) echo static ;; show) cat {show} ;; esac\n')
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")

    return shows


def _check():
    services.test_units_enabled_and_active(testinfra.get_host("local://"), ["sglang.service"], "systemd")


def test_a_static_unit_nothing_starts_is_reported(static_unit):
    static_unit({})
    with pytest.raises(AssertionError) as failed:
        _check()
    said = str(failed.value).split("\nassert ")[0]
    assert said.startswith("sglang.service static: no [Install] section and no unit wants it"), said
    assert "WantedBy=multi-user.target" in said and "systemctl enable sglang.service" in said, said


@pytest.mark.parametrize(
    "pulled_by",
    [{"WantedBy": "multi-user.target"}, {"RequiredBy": "llm.target"}, {"TriggeredBy": "sglang.socket"}],
)
def test_a_static_unit_another_unit_starts_passes(static_unit, pulled_by):
    static_unit(pulled_by)
    _check()
