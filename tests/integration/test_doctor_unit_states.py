"""`ktinfra doctor -k units` over docker:// against a container whose PID 1 is systemd, with serve units in
the states the check must tell apart: one still starting (ExecStartPost waiting, as ktinfra-serve@'s health
wait does while the model loads), one in auto-restart after its server died, one masked. Before, the first
two read "UNIT activating" alike and the masked one ended the check in testinfra's RuntimeError."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from systemd_box import box_sh as sh
from systemd_box import systemd_box

ROOT = Path(__file__).resolve().parents[2]
UNITS = {
    "/etc/systemd/system/sglang-loading.service": "[Service]\nType=exec\nExecStart=/bin/sleep infinity\n"
    "ExecStartPost=/bin/sleep 600\nTimeoutStartSec=900\n[Install]\nWantedBy=multi-user.target\n",
    "/etc/systemd/system/sglang-looping.service": "[Service]\nExecStart=/bin/false\nRestart=always\n"
    "RestartSec=600\n[Install]\nWantedBy=multi-user.target\n",
    "/lib/systemd/system/sglang-masked.service": "[Service]\nExecStart=/bin/sleep infinity\n",
}


@pytest.fixture(scope="module")
def box():
    with systemd_box("doctor-units") as name:
        for path, text in UNITS.items():
            sh(name, f"printf '%s' '{text}' > {path}")
        sh(name, "systemctl daemon-reload && systemctl mask sglang-masked.service")
        sh(name, "systemctl enable sglang-loading.service sglang-looping.service")
        sh(name, "systemctl start --no-block sglang-loading.service sglang-looping.service")
        for _ in range(30):
            states = sh(
                name, "systemctl show -p SubState --value sglang-loading.service sglang-looping.service"
            )
            if states.split() == ["start-post", "auto-restart"]:
                break
            subprocess.run(["sleep", "1"], check=True)
        yield name


def test_starting_restarting_and_masked_units_are_told_apart(box):
    res = subprocess.run(
        [sys.executable, "-m", "ktinfra", "doctor", "--hosts", f"docker://{box}", "--role", "any",
         "-k", "units_enabled", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    (check,) = json.loads(res.stdout)["checks"]
    said = check["message"]
    assert check["status"] == "failed", check
    assert "sglang-loading.service still starting (activating, start-post)" in said, said
    assert "sglang-looping.service restarting (activating, auto-restart)" in said, said
    assert "journalctl -u sglang-looping.service" in said, said
    assert "sglang-masked.service masked" in said and "systemctl unmask sglang-masked.service" in said, said
    assert "systemctl start sglang-masked" not in said, said
