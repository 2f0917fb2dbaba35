"""images/scripts/cleanup.sh removes the ssh host keys; the unit it installs to make them at first boot.

The boot itself (openssh-server, cleanup.sh, a restart of a systemd container) is tested in
tests/integration/image/test_image_review_ssh_hostkeys.py; here the unit passes `systemd-analyze verify`
and is what makes sshd start: ordered before ssh.service, pulled in by it, and skipped once a key exists.
"""

from __future__ import annotations

import configparser
import os
import re
import subprocess
from pathlib import Path

from test_render_support import make_systemd_root

SCRIPT = Path(__file__).parents[2] / "images" / "scripts" / "cleanup.sh"
UNIT = "ktinfra-ssh-hostkeys.service"


def unit_text() -> str:
    text = SCRIPT.read_text()
    match = re.search(rf"# BEGIN {UNIT}\n.*?<<'UNIT'\n(.*?)\nUNIT\n\s*# END {UNIT}\n", text, re.S)
    assert match, f"cleanup.sh writes no {UNIT}"
    return match.group(1) + "\n"


def test_the_unit_verifies(tmp_path):
    root = make_systemd_root(tmp_path / "root")
    (root / "etc/systemd/system" / UNIT).write_text(unit_text())
    keygen = root / "usr/bin/ssh-keygen"
    keygen.parent.mkdir(parents=True, exist_ok=True)
    keygen.write_text("#!/bin/sh\nexit 0\n")
    keygen.chmod(0o755)
    proc = subprocess.run(
        ["systemd-analyze", "verify", f"--root={root}", UNIT],
        capture_output=True,
        text=True,
        env=dict(os.environ, SYSTEMD_LOG_COLOR="0"),
    )
    assert proc.returncode == 0, proc.stderr
    assert UNIT not in proc.stderr, proc.stderr


def test_the_unit_makes_the_keys_before_sshd_only_while_there_are_none():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read_string(unit_text())
    assert unit["Service"]["ExecStart"] == "/usr/bin/ssh-keygen -A"
    assert unit["Service"]["Type"] == "oneshot"  # ssh.service waits for it to finish
    assert {"ssh.service", "sshd.service"} <= set(unit["Unit"]["Before"].split())
    assert {"ssh.service", "sshd.service"} <= set(unit["Install"]["WantedBy"].split())
    # cloud-init's keys, where it runs, win (its init stage is cloud-init-network.service from 24.3 on)
    assert {"cloud-init.service", "cloud-init-network.service"} <= set(unit["Unit"]["After"].split())
    assert unit["Unit"]["ConditionPathExistsGlob"] == "!/etc/ssh/ssh_host_*_key"


def test_the_unit_is_enabled_only_where_sshd_is_installed():
    text = SCRIPT.read_text()
    assert subprocess.run(["sh", "-n", str(SCRIPT)]).returncode == 0
    block = text[text.index("rm -f /etc/ssh/ssh_host_*") :]
    assert block.index("if [ -x /usr/sbin/sshd ]") < block.index(f"cat >/etc/systemd/system/{UNIT}")
    assert f"systemctl enable {UNIT}\n" in block
