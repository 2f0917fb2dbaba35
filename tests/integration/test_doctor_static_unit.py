"""`ktinfra doctor -k units` over docker:// against a container whose PID 1 is systemd: a hand-made
sglang-static.service without [Install], started by hand (systemctl is-enabled: static, exit 0), passed as
enabled though nothing starts it at boot; sglang-wanted.service, also without [Install] but linked into
multi-user.target.wants, is started at boot and passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from systemd_box import box_sh as sh
from systemd_box import systemd_box

ROOT = Path(__file__).resolve().parents[2]
UNIT = "[Service]\nExecStart=/bin/sleep infinity\n"


@pytest.fixture(scope="module")
def box():
    with systemd_box("doctor-static") as name:
        for unit in ("sglang-static", "sglang-wanted"):
            sh(name, f"printf '%s' '{UNIT}' > /etc/systemd/system/{unit}.service")
        sh(name, "mkdir -p /etc/systemd/system/multi-user.target.wants && ln -s ../sglang-wanted.service "
                 "/etc/systemd/system/multi-user.target.wants/")  # fmt: skip
        sh(name, "systemctl daemon-reload && systemctl start sglang-static.service sglang-wanted.service")
        yield name


def test_a_static_unit_started_by_hand_is_reported(box):
    assert sh(box, "systemctl is-enabled sglang-static.service").strip() == "static"
    res = subprocess.run(
        [sys.executable, "-m", "ktinfra", "doctor", "--hosts", f"docker://{box}", "--role", "any",
         "-k", "units_enabled", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    (check,) = json.loads(res.stdout)["checks"]
    said = check["message"]
    assert check["status"] == "failed", check
    assert "sglang-static.service static: no [Install] section and no unit wants it" in said, said
    assert "sglang-wanted" not in said, said
