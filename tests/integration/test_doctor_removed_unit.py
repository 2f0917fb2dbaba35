"""`ktinfra doctor -k units` over docker:// against a container whose PID 1 is systemd, where a hand-made
sglang-old.service failed and was then removed (disabled, file deleted, daemon-reload): systemd keeps it
listed as 'not-found failed failed' until reset-failed, and the units check failed on it ('no such unit')."""

from __future__ import annotations

import pytest
from systemd_box import box_sh as sh
from systemd_box import doctor_checks, systemd_box

UNIT = "/etc/systemd/system/sglang-old.service"


@pytest.fixture(scope="module")
def box():
    with systemd_box("doctor-removed-unit") as name:
        sh(name, f"printf '[Service]\\nExecStart=/bin/false\\n' > {UNIT} && systemctl daemon-reload")
        sh(name, "systemctl start sglang-old.service || true")
        sh(name, f"rm {UNIT} && systemctl daemon-reload")
        assert "not-found failed" in sh(name, "systemctl list-units --all --no-legend --plain 'sglang*'")
        yield name


def test_a_removed_unit_that_had_failed_is_not_checked(box):
    _, checks = doctor_checks(box, "-k", "units_enabled")
    (check,) = checks.values()
    assert check["status"] == "skipped", check
    assert "no unit matching" in check["message"], check
