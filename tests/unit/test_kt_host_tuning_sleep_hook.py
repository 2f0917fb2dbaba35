"""kt_host_tuning: TLP's sleep hook puts TLP's governor back at each resume, masked or not.

Debian 12's tlp ships /lib/systemd/system-sleep/tlp (`tlp resume` after each resume) and elogind's
/lib/elogind/system-sleep/49-tlp-sleep. With kt_host_tuning_governor_daemons=stop the role masked
tlp.service and TLP's udev rule and reported the governor applied, while the hook set
CPU_SCALING_GOVERNOR_ON_AC again after the next suspend. systemd-sleep runs every executable of that directory
and no file in /etc replaces one by name (systemd-suspend.service(8), systemd 252), so the role cannot mask
it: where TLP's config sets a governor, the hook counts (refused, naming it) and `stop` is refused before any
change, naming TLP_ENABLE=0. A hook is harmless where TLP's config sets no governor, or sets TLP_ENABLE=0.

Same stand-in systemctl and tmp_path directories as test_kt_host_tuning_governor_config.py.
"""

from __future__ import annotations

import os

import pytest
from test_kt_host_tuning_governor_config import GOVERNOR_CONF, RULE, STOP, write
from test_kt_host_tuning_governor_daemons import RUNNING, tune

HOOK = "#!/bin/sh\ncase $1 in\n    pre)  tlp suspend ;;\n    post) tlp resume  ;;\nesac\n"
HOOKS = {"sleep/systemd/tlp": HOOK, "sleep/elogind/49-tlp-sleep": HOOK, "udev/lib/85-tlp.rules": RULE}


def hooks_installed(tmp) -> None:
    write(tmp, HOOKS)
    for name in ("sleep/systemd/tlp", "sleep/elogind/49-tlp-sleep"):
        os.chmod(tmp / name, 0o755)
    (tmp / "udev" / "etc").mkdir()


def test_with_stop_tlps_sleep_hook_is_refused_before_anything_changes(tmp_path):
    """Before: tlp.service masked, the udev rule overridden, rc 0 and the governor reported applied."""
    write(tmp_path, GOVERNOR_CONF)
    hooks_installed(tmp_path)
    rc, output, calls, governor = tune(tmp_path, {"tlp.service": RUNNING}, STOP)
    assert rc != 0, output[-3000:]
    message = " ".join(output.split())
    hooks = f"{tmp_path}/sleep/systemd/tlp, {tmp_path}/sleep/elogind/49-tlp-sleep run `tlp resume`"
    assert hooks in message and "TLP_ENABLE=0 in /etc/tlp.conf" in message, message
    assert f"({tmp_path}/tlp/tlp.conf line 1: CPU_SCALING_GOVERNOR_ON_AC=powersave)" in message
    assert "nothing was changed" in message
    assert calls == [] and governor == "powersave"
    assert not (tmp_path / "udev" / "etc" / "85-tlp.rules").exists()


def test_by_default_the_hook_is_named_with_tlp(tmp_path):
    write(tmp_path, GOVERNOR_CONF)
    hooks_installed(tmp_path)
    masked = {"tlp.service": "LoadState=masked\nUnitFileState=masked\nActiveState=inactive\n"}
    write(tmp_path, {"udev/etc/85-tlp.rules": "# overridden\n"})  # what `stop` leaves of unit and rule
    rc, output, calls, governor = tune(tmp_path, masked)
    assert rc != 0, output[-3000:]
    message = " ".join(output.split())
    assert f"tlp (sleep hook, {tmp_path}/sleep/systemd/tlp)" in message, message
    assert "tlp: TLP's sleep hook: tlp resume" in message and "85-tlp.rules (" not in message
    # stop alone would be refused next (the hook cannot be masked): the advice says what works
    assert "Set TLP_ENABLE=0 in /etc/tlp.conf" in message and "=stop to have them masked" not in message
    assert calls == [] and governor == "powersave"


@pytest.mark.parametrize(
    "files",
    [
        # slow: a TLP config that sets no governor, so neither hook nor rule counts: the tlp-disabled case
        # (TLP_ENABLE=0 sets none either); the rule alone: test_kt_host_tuning_governor_config.py's
        # test_a_tlp_rule_without_a_governor_in_tlps_config_is_left
        pytest.param({}, marks=pytest.mark.slow),
        {"tlp/tlp.conf": "TLP_ENABLE=0\nCPU_SCALING_GOVERNOR_ON_AC=powersave\n"},
    ],
    ids=["no-governor-in-tlp-config", "tlp-disabled"],
)
def test_the_hook_passes_where_tlp_sets_no_governor(tmp_path, files):
    write(tmp_path, files)
    hooks_installed(tmp_path)
    rc, output, calls, governor = tune(tmp_path, {"tlp.service": RUNNING}, STOP)
    assert rc == 0, output[-3000:]
    assert calls == [] and governor == "performance"


def test_a_hook_that_is_not_executable_or_not_tlps_is_left(tmp_path):
    """systemd-sleep runs executables only; a hook that names `tlp resume` in a comment does not run it."""
    write(tmp_path, GOVERNOR_CONF | {"sleep/systemd/tlp": HOOK, "sleep/systemd/50-other": "# tlp resume\n"})
    os.chmod(tmp_path / "sleep" / "systemd" / "50-other", 0o755)
    rc, output, calls, governor = tune(tmp_path, {}, STOP)
    assert rc == 0, output[-3000:]
    assert governor == "performance"
