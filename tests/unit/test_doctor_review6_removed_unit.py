"""A serve unit whose file was removed after it had failed stays listed by `systemctl list-units --all` as
'sglang-old.service not-found failed failed' until reset-failed (checked in the debian12-systemd image), and
the units check failed on it: 'sglang-old.service: no such unit', on a host where it was removed on purpose
(one removed while down and not failed is unloaded, never listed, never checked). Real testinfra local host;
`systemctl` on PATH answers list-units, list-unit-files and show as systemd does there."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")


@pytest.fixture
def systemd(tmp_path, monkeypatch):
    """A systemctl that lists `unit` by list-units --all only (no unit file) in ActiveState `active`."""

    def unit(name: str, active: str) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        tool = bin_dir / "systemctl"
        tool.write_text(
            "#!/bin/sh\n"
            'case "$1 $2" in\n'
            "  'list-unit-files '*) exit 1 ;;\n"
            f"  'list-units '*) echo '{name} not-found {active} {active} {name}' ;;\n"
            f"  'is-enabled '*) echo 'Failed to get unit file state for {name}' >&2; exit 1 ;;\n"
            f"  'show '*) printf 'LoadState=not-found\\nActiveState={active}\\nSubState={active}\\n' ;;\n"
            "esac\n"
        )
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")

    return unit


def test_a_removed_unit_that_had_failed_is_not_checked(systemd, capsys):
    systemd("sglang-old.service", "failed")
    host = testinfra.get_host("local://")
    units = services.installed_units(host)
    assert units == [], units
    out = capsys.readouterr().out
    note = "not checked (unit file removed, the unit down; systemctl reset-failed clears it): sglang-old"
    assert note in out, out
    with pytest.raises(pytest.skip.Exception):
        services.test_units_enabled_and_active(host, units, "systemd")


def test_a_removed_unit_that_still_runs_is_checked(systemd):
    """Its server runs from a file that is gone: nothing starts it at boot."""
    systemd("sglang-old.service", "active")
    host = testinfra.get_host("local://")
    units = services.installed_units(host)
    assert units == ["sglang-old.service"], units
    with pytest.raises(AssertionError, match="sglang-old.service: no such unit"):
        services.test_units_enabled_and_active(host, units, "systemd")


def test_the_skips_name_the_units_passed_over(systemd, tmp_path):
    """With every listed unit passed over, the units check said 'no unit matching ktinfra-serve* sglang*
    installed' and the health check 'no serve unit installed', on a host that lists the unit."""
    systemd("sglang-old.service", "failed")
    host = testinfra.get_host("local://")
    units = services.installed_units(host)
    with pytest.raises(pytest.skip.Exception) as skipped:
        services.test_units_enabled_and_active(host, units, "systemd")
    over = "(passed over: sglang-old.service (unit file removed))"
    assert str(skipped.value) == f"no unit matching ktinfra-serve* sglang* to check {over}", skipped.value
    config = importlib.import_module("test_doctor_review3_stopped_instance")._Config()
    with pytest.raises(pytest.skip.Exception) as skipped:
        services.test_health_endpoint_answers(host, config, units, "systemd", sys.executable, str(tmp_path))
    assert str(skipped.value).startswith(f"no serve unit to ask {over} and no --health-url"), skipped.value
