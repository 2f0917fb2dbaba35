"""kt_host_tuning_governor_daemons=stop records each mask link it made, in kt_host_tuning__unit_dir.

The mask step (governor_daemons_stop.yml, kt_tuning_record action=mask) was given no unit_dir and looked for
the links systemctl mask makes in the module's default, /etc/systemd/system: the role's tests, whose
systemctl stand-in masks in tmp_path, read this machine's /etc/systemd/system and recorded no mask, so
absent would leave the unit masked. vars/main.yml now holds kt_host_tuning__unit_dir (/etc/systemd/system)
and the step passes it; the tests point it into tmp_path (config_paths).

The role's task files as tasks/main.yml includes them, with test_kt_host_tuning_governor_daemons' stand-ins.
"""

from __future__ import annotations

import json
import os

import yaml
from role_play import ROLES
from test_kt_host_tuning_governor_daemons import RUNNING, tune

STOP = {"kt_host_tuning_governor_daemons": "stop"}


def test_the_mask_link_is_read_and_recorded_in_the_unit_dir(tmp_path):
    rc, output, calls, governor = tune(tmp_path, {"tuned.service": RUNNING}, STOP)
    assert rc == 0, output[-3000:]
    assert calls == ["mask --now tuned.service"] and governor == "performance"
    link = tmp_path / "unit-links" / "tuned.service"
    assert os.readlink(link) == "/dev/null"
    stat = link.lstat()
    made = json.loads((tmp_path / "host-tuning.json").read_text())["masked"]["tuned.service"]["mask"]
    assert made == {"path": str(link), "dev": stat.st_dev, "ino": stat.st_ino, "mtime_ns": stat.st_mtime_ns}


def test_udevadm_and_the_unit_dir_are_role_vars():
    role_vars = yaml.safe_load((ROLES / "kt_host_tuning" / "vars" / "main.yml").read_text())
    assert role_vars["kt_host_tuning__udevadm"] == "udevadm"
    assert role_vars["kt_host_tuning__unit_dir"] == "/etc/systemd/system"
    for name in ("governor_daemons_stop.yml", "undo.yml"):
        text = (ROLES / "kt_host_tuning" / "tasks" / name).read_text()
        assert "default('udevadm')" not in text, name
