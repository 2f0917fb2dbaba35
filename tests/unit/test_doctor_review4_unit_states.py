"""The serve-units check on a unit that is not active said only "<unit> activating": a ktinfra-serve@ unit
still loading its model (ExecStartPost waits for health) and one in systemd's auto-restart loop read the
same, with nothing on which of the two, nor where to look, and no different from a unit that failed. A
masked unit ended the check in testinfra's RuntimeError ('Unable to determine state of ... Does this service
exist?'), and a unit named with --kt-unit that does not exist read "not enabled; inactive". Real testinfra
local host; `systemctl` on PATH answers is-enabled and show as systemd does for such a unit."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
services = importlib.import_module("test_services")

UNIT = "ktinfra-serve@qwen3.service"


@pytest.fixture
def systemd(tmp_path, monkeypatch):
    """A systemctl whose `is-enabled` prints `enabled` (exit `rc`) and whose `show` prints `props`."""

    def unit(enabled: str, props: dict, rc: int = 0) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        (tmp_path / "show.txt").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        active = props.get("ActiveState", "")
        tool = bin_dir / "systemctl"
        tool.write_text(
            "#!/bin/sh\n"
            'case "$1" in\n'
            f"  is-enabled) echo {enabled}; exit {rc} ;;\n"
            f"  is-active) echo {active}; [ {active} = active ]; exit $? ;;\n"
            f"  show) cat {tmp_path / 'show.txt'} ;;\n"
            "esac\n"
        )
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")

    return unit


def _said(unit: str = UNIT) -> str:
    host = testinfra.get_host("local://")
    with pytest.raises(AssertionError) as failed:
        services.test_units_enabled_and_active(host, [unit], "systemd")
    return str(failed.value)


def _props(active: str, sub: str, result: str = "success", restarts: int = 0, load: str = "loaded") -> dict:
    return {"LoadState": load, "ActiveState": active, "SubState": sub, "Result": result,
            "NRestarts": restarts}  # fmt: skip


def test_a_unit_still_loading_its_model_is_said_to_be_starting(systemd):
    systemd("enabled", _props("activating", "start-post"))
    said = _said()
    assert f"{UNIT} still starting (activating, start-post)" in said, said
    assert f"journalctl -u {UNIT}" in said and "restart" not in said, said


def test_a_unit_in_auto_restart_is_said_to_be_restarting(systemd):
    systemd("enabled", _props("activating", "auto-restart", result="exit-code", restarts=2))
    said = _said()
    assert f"{UNIT} restarting (activating, auto-restart)" in said, said
    assert "exited (exit-code)" in said and "2 restarts so far" in said, said
    assert f"journalctl -u {UNIT}" in said and "still starting" not in said, said


def test_a_failed_unit_says_failed_and_where_to_look(systemd):
    systemd("enabled", _props("failed", "failed", result="timeout"))
    said = _said()
    assert f"{UNIT} failed (timeout)" in said and f"journalctl -u {UNIT}" in said, said
    assert "starting" not in said and "restarting" not in said, said


def test_an_inactive_unit_says_it_is_not_started(systemd):
    systemd("enabled", _props("inactive", "dead"))
    said = _said()
    assert f"{UNIT} inactive (dead)" in said and "starting" not in said, said


def test_an_active_enabled_unit_passes(systemd, capsys):
    systemd("enabled", _props("active", "running"))
    services.test_units_enabled_and_active(testinfra.get_host("local://"), [UNIT], "systemd")
    assert f"units enabled and active: {UNIT}" in capsys.readouterr().out


def test_a_masked_unit_is_a_failed_check_that_says_masked(systemd):
    systemd("masked", _props("inactive", "dead", load="masked"), rc=1)
    said = _said()
    assert said.startswith(f"{UNIT} masked") and f"systemctl unmask {UNIT}" in said, said
    assert "systemctl start" not in said, said  # a masked unit does not start: the hint must not say so


def test_a_named_unit_that_does_not_exist_says_so(systemd):
    systemd("", _props("inactive", "dead", load="not-found"), rc=1)
    said = _said("sglang-typo.service")
    assert said.startswith("sglang-typo.service: no such unit"), said
    assert "inactive" not in said, said


def test_a_systemctl_that_cannot_answer_says_why(tmp_path, monkeypatch):
    """systemctl as a user without a system bus (a container without dbus): before, 'UNIT not enabled
    (Failed to connect to bus ...); UNIT in no known state (?)'."""
    tool = tmp_path / "systemctl"
    tool.write_text("#!/bin/sh\necho 'Failed to connect to bus: No such file or directory' >&2\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{Path(sys.executable).parent}:/usr/bin:/bin")
    said = _said().split("\nassert ")[0]
    bus = "Failed to connect to bus: No such file or directory"
    assert said == f"{UNIT}: systemctl cannot tell its state ({bus})", said


def test_units_that_cannot_be_listed_fail_rather_than_skip(tmp_path, monkeypatch):
    """The unit list read from a systemctl that cannot answer was empty: 'no unit matching ktinfra-serve*
    sglang* installed', a skip, and the health check skipped too: doctor passed whatever ran there."""
    tool = tmp_path / "systemctl"
    tool.write_text("#!/bin/sh\necho 'Failed to connect to bus: No such file or directory' >&2\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{Path(sys.executable).parent}:/usr/bin:/bin")
    with pytest.raises(pytest.fail.Exception) as failed:
        services.installed_units(testinfra.get_host("local://"))
    said = str(failed.value)
    assert said.startswith("cannot list the serve units: systemctl list-unit-files"), said
    assert "Failed to connect to bus" in said, said


def test_no_unit_matching_is_still_none_installed(tmp_path, monkeypatch):
    """systemd 252's list-unit-files exits 1 without a word where no unit file matches the patterns."""
    tool = tmp_path / "systemctl"
    tool.write_text('#!/bin/sh\n[ "$1" = list-unit-files ] && exit 1\nexit 0\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{Path(sys.executable).parent}:/usr/bin:/bin")
    assert services.installed_units(testinfra.get_host("local://")) == []
