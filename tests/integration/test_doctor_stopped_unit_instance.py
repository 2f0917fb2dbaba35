"""`ktinfra doctor -k units` over docker:// against a container whose PID 1 is systemd, with kt_serve's two
instance states: one started (enabled, running) and one set to stopped (disabled, stopped) after it had
failed, which systemd keeps listed as 'loaded failed failed'. The check failed on the stopped one ('not
enabled (disabled)', 'failed') while every instance meant to run was up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from systemd_box import box_sh as sh
from systemd_box import systemd_box

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = (
    '[Service]\nExecStart=/bin/sh -c "case %i in spare) exit 3;; esac; exec sleep infinity"\n'
    "[Install]\nWantedBy=multi-user.target\n"
)


@pytest.fixture(scope="module")
def box():
    with systemd_box("doctor-stopped") as name:
        sh(name, f"printf '%s' '{TEMPLATE}' > /etc/systemd/system/ktinfra-serve@.service")
        sh(name, "systemctl daemon-reload && systemctl enable --now ktinfra-serve@main.service")
        sh(name, "systemctl enable ktinfra-serve@spare.service && systemctl start ktinfra-serve@spare.service"
                 " || true")  # fmt: skip
        sh(name, "systemctl disable --now ktinfra-serve@spare.service")
        yield name


def test_an_instance_set_to_stopped_after_it_failed_is_not_checked(box):
    listed = sh(box, "systemctl list-units --all --no-legend --plain 'ktinfra-serve*'")
    assert "ktinfra-serve@spare.service loaded failed failed" in " ".join(listed.split()), listed
    res = subprocess.run(
        [sys.executable, "-m", "ktinfra", "doctor", "--hosts", f"docker://{box}", "--role", "any",
         "-k", "units_enabled", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    (check,) = json.loads(res.stdout)["checks"]
    assert check["status"] == "passed", check
    assert res.returncode == 0, res.stderr
