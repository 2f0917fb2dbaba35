"""kt_host_tuning against a real systemd (the debian12-systemd container): a unit that sets its own CPU
governor at every boot.

Ubuntu's ondemand.service (/lib/systemd/set-cpufreq, enabled by default) puts every CPU on ondemand, schedutil
or powersave a few seconds into each boot, after systemd-tmpfiles has written the role's governor line, and
cpufrequtils' init script does the same: the `performance` the run reported applied and persisted held until
the next reboot only. Here a stand-in ondemand.service is installed and enabled; the role (told the host is
no container, so it persists as on a server) must leave it disabled, and a second run change nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from systemd_box import systemd_box

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
UNIT = """[Unit]
Description=stand-in for Ubuntu's set-cpufreq
[Service]
Type=oneshot
ExecStart=/bin/true
[Install]
WantedBy=multi-user.target
"""


def sh(box: str, script: str, stdin: str = "") -> str:
    command = ["docker", "exec", "-i", box, "sh", "-c", script]
    proc = subprocess.run(command, input=stdin, capture_output=True, text=True)
    return proc.stdout


def tune(tmp: Path, box: str) -> tuple[int, str]:
    play = [{"hosts": "all", "roles": [{"role": "kt_host_tuning"}], "vars": {
        "kt_preflight_facts": {"container": False}, "kt_host_tuning_cpu_governor": "performance",
        "kt_host_tuning_sysctls": {}, "kt_host_tuning_thp": "", "kt_host_tuning_shm_size": ""}}]  # fmt: skip
    (tmp / "play.yml").write_text(json.dumps(play))
    (tmp / "hosts").write_text(
        f"{box} ansible_connection=community.docker.docker ansible_python_interpreter=/usr/bin/python3\n"
    )
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"))
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    command = [ANSIBLE_PLAYBOOK, "-i", str(tmp / "hosts"), str(tmp / "play.yml")]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_a_unit_that_resets_the_governor_at_boot_is_disabled_once(tmp_path):
    with systemd_box("kt-tuning-governor") as box:
        sh(box, "cat > /etc/systemd/system/ondemand.service", UNIT)
        sh(box, "systemctl enable ondemand.service")
        assert sh(box, "systemctl is-enabled ondemand.service") == "enabled\n"
        rc, output = tune(tmp_path, box)
        assert rc == 0, output[-4000:]
        assert sh(box, "systemctl is-enabled ondemand.service").strip() == "disabled", output[-4000:]
        # the governor line is still persisted; cpufrequtils (not installed) is passed over
        assert "scaling_governor - - - - performance" in sh(box, "cat /etc/tmpfiles.d/ktinfra-tuning.conf")
        rc, output = tune(tmp_path, box)
        assert rc == 0 and "changed=0" in output, output[-4000:]
