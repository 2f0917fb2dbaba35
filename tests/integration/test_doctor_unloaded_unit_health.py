"""`ktinfra doctor -k health` over docker:// against a container whose PID 1 is systemd, with a masked
sglang unit and no other: the health check asked it at sglang's default URL and failed 'Connection refused'
(a masked unit has no unit file to take its URL from); the units check is where a masked unit is reported."""

from __future__ import annotations

import pytest
from systemd_box import box_sh as sh
from systemd_box import doctor_checks, systemd_box


@pytest.fixture(scope="module")
def box():
    with systemd_box("doctor-masked-health") as name:
        sh(name, "printf '[Service]\\nExecStart=/bin/sleep infinity\\n' > /lib/systemd/system/sglang.service")
        sh(name, "systemctl daemon-reload && systemctl mask sglang.service")
        yield name


def test_a_masked_unit_is_not_asked_for_its_health(box):
    returncode, checks = doctor_checks(box, "-k", "services")
    health, units = checks["services.health_endpoint_answers"], checks["services.units_enabled_and_active"]
    assert units["status"] == "failed" and "sglang.service masked" in units["message"], units
    assert health["status"] == "skipped", health
    assert "sglang.service (masked)" in health["message"], health
    assert "Connection refused" not in health["message"], health
    assert returncode == 1
