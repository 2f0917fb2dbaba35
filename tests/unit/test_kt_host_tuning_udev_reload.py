"""kt_host_tuning: udev is told to reload its rules once TLP's udev rule is masked.

With kt_host_tuning_governor_daemons=stop the role writes a comment-only /etc/udev/rules.d/85-tlp.rules over
TLP's rule, and left it there: udevd, which may keep the rules it has read until told to reload, could still
run `tlp auto` (and TLP's governor) at the next power-source change. Now `udevadm control --reload` runs after
the mask file is written, where udevd runs (its control socket exists), and is skipped where it does not (a
container without udevd), the run passing either way.

Same stand-in systemctl and tmp_path directories as test_kt_host_tuning_governor_config.py; `udevadm` is a
stand-in on PATH that logs its arguments, the control socket a file in tmp_path.
"""

from __future__ import annotations

import pytest
from test_kt_host_tuning_governor_config import GOVERNOR_CONF, RULE, STOP, write
from test_kt_host_tuning_governor_daemons import tune

DISABLED = {"tlp.service": "LoadState=loaded\nUnitFileState=disabled\nActiveState=inactive\n"}


def udevadm(tmp):
    log = tmp / "udevadm.log"
    stand_in = tmp / "bin" / "udevadm"
    stand_in.parent.mkdir(parents=True, exist_ok=True)
    stand_in.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n')
    stand_in.chmod(0o755)
    return log


@pytest.mark.parametrize(
    "udevd",
    [
        True,
        # slow: without udevd the mask is written, the reload skipped and the run passes, twice, in a real
        # systemd container: tests/integration/test_kt_host_tuning_governor_config.py's
        # test_tlps_rule_is_masked_with_it_and_cpupower_without_a_governor_is_left
        pytest.param(False, marks=pytest.mark.slow),
    ],
    ids=["udevd-runs", "no-udevd"],
)
def test_udev_rules_are_reloaded_after_the_mask_where_udevd_runs(tmp_path, udevd):
    """Before: no udevadm call at all, the mask file written and udevd left on the rules it had."""
    write(tmp_path, GOVERNOR_CONF | {"udev/lib/85-tlp.rules": RULE})
    (tmp_path / "udev" / "etc").mkdir()
    if udevd:
        (tmp_path / "udev" / "control").write_text("")
    log = udevadm(tmp_path)
    rc, output, calls, governor = tune(tmp_path, DISABLED, STOP)
    assert rc == 0, output[-3000:]
    assert (tmp_path / "udev" / "etc" / "85-tlp.rules").read_text().startswith("# kt_host_tuning: replaces")
    assert governor == "performance"
    reloads = log.read_text().splitlines() if log.exists() else []
    assert reloads == (["control --reload"] if udevd else []), output[-3000:]

    rc, output, calls, governor = tune(tmp_path, DISABLED, STOP)  # masked already: nothing to reload
    assert rc == 0, output[-3000:]
    assert (log.read_text().splitlines() if log.exists() else []) == reloads


def test_where_udevd_runs_but_udevadm_is_not_there_the_run_says_so_and_goes_on(tmp_path):
    """udevd's socket there, no udevadm (a chroot or container given the host's /run/udev). Before: the run
    failed on the missing command, after masking tlp's rule."""
    write(tmp_path, GOVERNOR_CONF | {"udev/lib/85-tlp.rules": RULE})
    (tmp_path / "udev" / "etc").mkdir()
    (tmp_path / "udev" / "control").write_text("")
    missing = tmp_path / "bin" / "no-udevadm"  # not this machine's: it may have one
    rc, output, calls, governor = tune(tmp_path, DISABLED, STOP | {"kt_host_tuning__udevadm": str(missing)})
    assert rc == 0, output[-3000:]
    assert (tmp_path / "udev" / "etc" / "85-tlp.rules").read_text().startswith("# kt_host_tuning: replaces")
    assert governor == "performance"
    assert f"but its rules were not reloaded, udevadm not found: {missing}" in output, output[-3000:]
