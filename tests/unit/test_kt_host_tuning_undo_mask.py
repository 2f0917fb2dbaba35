"""kt_host_tuning_state=absent unmasks a unit only while its mask is still the one the role made.

The role masks the governor daemons (governor_daemons_stop.yml, systemctl mask --now: a link
/etc/systemd/system/<unit> -> /dev/null) and absent unmasked every unit of the record that was masked then,
whoever had masked it: an admin's mask made after the role's was undone (unmasked, then masked again), and so
was one that was there before the role ran. Now the role's mask step (kt_tuning_record action=mask) records
each link it made (device, inode, mtime from lstat right after systemctl mask, none where a mask was there
before), and absent unmasks only while that link is still there; otherwise the unit stays masked and the
message says so.

Module and tasks/undo.yml only (never the whole role), with the record, the units' folder and the other
stand-ins in tmp_path and a systemctl on PATH that logs its calls and masks with a link in tmp_path/units.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_kt_host_tuning_record import host, record
from test_kt_host_tuning_undo import mask, tuned, undo

UNIT = "tuned.service"


def masked_by_the_role(tmp: Path) -> dict:
    """host(), recorded, the unit masked by the role's step, the rest tuned: the arguments."""
    args = host(tmp)
    rc, output = record(tmp, args)
    assert rc == 0, output[-3000:]
    rc, output = mask(tmp, args)
    assert rc == 0, output[-3000:]
    tuned(tmp)  # is-enabled says masked, is-active inactive
    return args


def test_the_mask_step_records_the_link_it_made(tmp_path):
    args = masked_by_the_role(tmp_path)
    link = tmp_path / "units" / UNIT
    assert os.readlink(link) == "/dev/null"
    made = json.loads(Path(args["path"]).read_text())["masked"][UNIT]["mask"]
    stat = link.lstat()
    assert made == {"path": str(link), "dev": stat.st_dev, "ino": stat.st_ino, "mtime_ns": stat.st_mtime_ns}


# slow: power-profiles-daemon masked by the role, unmasked and masked again by hand, stays masked with this
# message, in a real systemd: tests/integration/test_kt_host_tuning_undo_container.py's
# test_present_then_absent_leaves_the_host_as_it_was
@pytest.mark.slow
def test_a_unit_masked_again_since_the_role_masked_it_stays_masked(tmp_path):
    """Before: absent ran systemctl unmask on it (and started it), undoing the admin's mask."""
    args = masked_by_the_role(tmp_path)
    link = tmp_path / "units" / UNIT
    link.unlink()  # the admin: systemctl unmask, later systemctl mask again
    os.symlink("/dev/null", link)

    rc, output, calls = undo(tmp_path, Path(args["path"]))
    assert rc == 0, output[-3000:]
    assert calls == ["enable ondemand.service"], calls  # neither unmasked nor started
    assert f"{UNIT} stays masked (masked again since the role did)" in output, output[-3000:]
    assert os.readlink(link) == "/dev/null"
    assert not Path(args["path"]).exists()  # the rest was put back: the record is done with


def test_a_unit_masked_before_the_role_ran_stays_masked(tmp_path):
    """Running but masked already (systemctl mask without --now): the mask the role's step found is not the
    role's. Before: absent unmasked it."""
    args = host(tmp_path)
    (tmp_path / "units").mkdir()
    os.symlink("/dev/null", tmp_path / "units" / UNIT)
    args["masked"] = [{"unit": UNIT, "active": "active", "enabled": "masked"}]
    rc, output = record(tmp_path, args)
    assert rc == 0, output[-3000:]
    rc, output = mask(tmp_path, args)
    assert rc == 0, output[-3000:]
    assert "mask" not in json.loads(Path(args["path"]).read_text())["masked"][UNIT]
    tuned(tmp_path)

    rc, output, calls = undo(tmp_path, Path(args["path"]))
    assert rc == 0, output[-3000:]
    assert calls == ["enable ondemand.service"], calls
    assert f"{UNIT} stays masked (the role did not make its mask)" in output, output[-3000:]


def test_a_recorded_mask_that_is_not_one_fails_before_anything_changes(tmp_path):
    args = masked_by_the_role(tmp_path)
    state = Path(args["path"])
    broken = json.loads(state.read_text())
    broken["masked"][UNIT]["mask"]["path"] = "units/tuned.service"
    state.write_text(json.dumps(broken))

    rc, output, calls = undo(tmp_path, state)
    assert rc != 0 and calls == [], output[-3000:]
    assert f"{UNIT}'s mask is not a path with its dev, ino and mtime_ns" in output, output[-3000:]
    assert "nothing was changed" in output and json.loads(state.read_text()) == broken
    assert (tmp_path / "sys" / "vm" / "swappiness").read_text() == "10\n"


def test_the_mask_step_refuses_a_name_that_is_not_a_unit_before_anything_changes(tmp_path):
    args = host(tmp_path)
    args["masked"] = [{"unit": "../../tuned.service", "active": "active", "enabled": "enabled"}]
    rc, output = mask(tmp_path, args)
    assert rc != 0 and "not unit names; nothing was changed" in output, output[-3000:]
    assert not Path(args["path"]).exists() and not (tmp_path / "systemctl.log").exists()
