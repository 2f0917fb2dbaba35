"""kt_host_tuning: a renamed copy of TLP's udev rule or sleep hook runs `tlp auto` / `tlp resume` as well.

library/kt_governor_config.py counted a rule or hook only where its name said tlp: a local rule
99-power.rules running `tlp auto`, or a hook 50-power running `tlp resume`, was missed, and with TLP's
governor in its config the role set its own governor and reported it applied while the rule or hook set
TLP's again at the next power-source change or resume. They are now found by what they run (outside a
comment), whatever their name.

Same stand-in systemctl and tmp_path directories as test_kt_host_tuning_governor_config.py.
"""

from __future__ import annotations

import os

from test_kt_host_tuning_governor_config import GOVERNOR_CONF, RULE, STOP, write
from test_kt_host_tuning_governor_daemons import tune
from test_kt_host_tuning_sleep_hook import HOOK


def test_a_renamed_udev_rule_that_runs_tlp_auto_is_refused_then_masked_with_stop(tmp_path):
    write(tmp_path, GOVERNOR_CONF | {"udev/lib/99-power.rules": RULE})
    (tmp_path / "udev" / "etc").mkdir()

    rc, output, calls, governor = tune(tmp_path, {})
    assert rc != 0, output[-3000:]
    message = " ".join(output.split())
    assert f"99-power.rules (udev rule, {tmp_path}/udev/lib/99-power.rules) sets the CPU governor" in message
    assert "nothing was changed" in message and calls == [] and governor == "powersave"

    rc, output, calls, governor = tune(tmp_path, {}, STOP)
    assert rc == 0, output[-3000:]
    assert "`tlp auto`" in (tmp_path / "udev" / "etc" / "99-power.rules").read_text()
    assert governor == "performance"


def test_a_renamed_sleep_hook_that_runs_tlp_resume_is_refused_with_stop(tmp_path):
    write(tmp_path, GOVERNOR_CONF | {"sleep/systemd/50-power": HOOK})
    os.chmod(tmp_path / "sleep" / "systemd" / "50-power", 0o755)

    rc, output, calls, governor = tune(tmp_path, {}, STOP)
    assert rc != 0, output[-3000:]
    message = " ".join(output.split())
    assert f"{tmp_path}/sleep/systemd/50-power runs `tlp resume`" in message, message
    assert "TLP_ENABLE=0 in /etc/tlp.conf" in message and "nothing was changed" in message
    assert calls == [] and governor == "powersave"


def test_a_rule_or_hook_that_names_tlp_in_a_comment_only_is_left(tmp_path):
    commented = {"udev/lib/99-power.rules": f"# {RULE}", "sleep/systemd/50-power": "#!/bin/sh\n#tlp resume\n"}
    write(tmp_path, GOVERNOR_CONF | commented)
    os.chmod(tmp_path / "sleep" / "systemd" / "50-power", 0o755)
    (tmp_path / "udev" / "etc").mkdir()

    rc, output, calls, governor = tune(tmp_path, {}, STOP)
    assert rc == 0, output[-3000:]
    assert calls == [] and governor == "performance"
    assert not (tmp_path / "udev" / "etc" / "99-power.rules").exists()
