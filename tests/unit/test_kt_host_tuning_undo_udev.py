"""kt_host_tuning_state=absent removes the role's udev override (TLP's rule masked) and reloads udev's rules
where udevd runs (its control socket). Where the socket is there but udevadm is not (a chroot or container
given the host's /run/udev), the undo failed on the missing command after it had put everything back; now it
ends well and its message says the rules were not reloaded.

tasks/undo.yml only, the record, the override, the socket and a stand-in udevadm in tmp_path.
"""

from __future__ import annotations

import pytest
from test_kt_host_tuning_record import record
from test_kt_host_tuning_udev_reload import udevadm
from test_kt_host_tuning_undo import undo


@pytest.mark.parametrize("found", [True, False], ids=["udevadm", "no-udevadm"])
def test_the_override_goes_and_udev_reloads_where_it_can(tmp_path, found):
    override = tmp_path / "udev" / "etc" / "85-tlp.rules"
    override.parent.mkdir(parents=True)
    (tmp_path / "udev" / "control").write_text("")
    state = tmp_path / "state" / "host-tuning.json"
    rc, output = record(tmp_path, {"path": str(state), "files": [str(override)]})
    assert rc == 0, output[-3000:]
    override.write_text("# kt_host_tuning: replaces 85-tlp.rules\n")
    log = udevadm(tmp_path) if found else tmp_path / "udevadm.log"
    name = "udevadm" if found else str(tmp_path / "bin" / "no-udevadm")  # not this machine's: it may have one
    extra = {"kt_host_tuning__udev_control": str(tmp_path / "udev" / "control")}
    extra["kt_host_tuning__udevadm"] = name

    rc, output, _ = undo(tmp_path, state, extra=extra)
    assert rc == 0, output[-3000:]
    assert not override.exists() and not state.exists()
    assert (log.read_text().splitlines() if log.exists() else []) == (["control --reload"] if found else [])
    missed = f"its rules were not reloaded, udevadm not found: {name}"
    assert (missed in output) != found, output[-3000:]
