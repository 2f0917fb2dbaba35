"""kt_host_tuning_state=absent starts a unit it masked, that ran before, only where it removed that mask.

A unit the role masked (governor_daemons_stop.yml) and an admin has since unmasked and left stopped was
started by absent all the same, as the record says it ran before the role: the admin's choice undone.
absent now starts only the units whose mask it removed in this run; one unmasked since stays stopped and
the message says so, with the systemctl start to run.

Module and tasks/undo.yml only (never the whole role), with the stand-ins of test_kt_host_tuning_undo_mask.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_kt_host_tuning_undo import undo
from test_kt_host_tuning_undo_mask import UNIT, masked_by_the_role


@pytest.mark.parametrize(
    "enabled",
    [
        "enabled",
        # slow: a unit unmasked since and left stopped is not started, as in the enabled case
        pytest.param("disabled", marks=pytest.mark.slow),
    ],
)
def test_a_unit_unmasked_since_and_left_stopped_is_not_started(tmp_path, enabled):
    args = masked_by_the_role(tmp_path)
    (tmp_path / "units" / UNIT).unlink()  # the admin: systemctl unmask, and it stays stopped
    (tmp_path / "units" / f"{UNIT}.is-enabled").write_text(f"{enabled}\n")

    rc, output, calls = undo(tmp_path, Path(args["path"]))
    assert rc == 0, output[-3000:]
    assert calls == ["enable ondemand.service"], calls  # before: start tuned.service too
    stays = f"{UNIT} stays stopped (unmasked since the role masked it, and not started): systemctl start"
    assert stays in " ".join(output.split()), output[-3000:]
    assert not Path(args["path"]).exists()


def test_a_unit_unmasked_and_started_since_is_left_alone(tmp_path):
    args = masked_by_the_role(tmp_path)
    (tmp_path / "units" / UNIT).unlink()
    (tmp_path / "units" / f"{UNIT}.is-enabled").write_text("enabled\n")
    (tmp_path / "units" / f"{UNIT}.is-active").write_text("active\n")

    rc, output, calls = undo(tmp_path, Path(args["path"]))
    assert rc == 0, output[-3000:]
    assert calls == ["enable ondemand.service"], calls
    assert f"{UNIT} stays" not in output, output[-3000:]
