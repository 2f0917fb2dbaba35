"""kt_host_tuning against a real systemd (the debian12-systemd container): tuned and power-profiles-daemon,
which set the CPU governor again at their start and on power events, after the role wrote it.

Stand-in units of those names run and are enabled. By default the role must fail before any change, naming
both, and leave them as they were; with kt_host_tuning_governor_daemons=stop they end stopped and masked (a
masked unit cannot be started again, not by a D-Bus request either), and a second run changes nothing. The
container has no cpufreq: the role is given a governors file inside it, as a host with cpufreq has.
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
DAEMONS = ("tuned.service", "power-profiles-daemon.service")
UNIT = """[Unit]
Description=stand-in for a daemon that sets the CPU governor
[Service]
ExecStart=/bin/sleep infinity
[Install]
WantedBy=multi-user.target
"""
GOVERNORS = "/etc/ktinfra-test/scaling_available_governors"


def sh(box: str, script: str, stdin: str = "") -> str:
    command = ["docker", "exec", "-i", box, "sh", "-c", script]
    return subprocess.run(command, input=stdin, capture_output=True, text=True).stdout


def states(box: str) -> list[str]:
    return [sh(box, f"systemctl is-active {d}; systemctl is-enabled {d}").split() for d in DAEMONS]


def tune(tmp: Path, box: str, **role_vars) -> tuple[int, str]:
    # extra vars: kt_host_tuning_governors_file is in the role's vars/main.yml, above play vars
    extra = {"kt_preflight_facts": {"container": False}, "kt_host_tuning_cpu_governor": "performance",
             "kt_host_tuning_governors_file": GOVERNORS, "kt_host_tuning_sysctls": {},
             "kt_host_tuning_thp": "", "kt_host_tuning_shm_size": ""} | role_vars  # fmt: skip
    (tmp / "play.yml").write_text(json.dumps([{"hosts": "all", "roles": [{"role": "kt_host_tuning"}]}]))
    (tmp / "vars.json").write_text(json.dumps(extra))
    (tmp / "hosts").write_text(
        f"{box} ansible_connection=community.docker.docker ansible_python_interpreter=/usr/bin/python3\n"
    )
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"))
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    play = [str(tmp / "play.yml"), "-e", f"@{tmp / 'vars.json'}"]
    command = [ANSIBLE_PLAYBOOK, "-i", str(tmp / "hosts"), *play]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_governor_daemons_are_refused_then_stopped_and_masked_when_asked(tmp_path):
    with systemd_box("kt-tuning-daemons") as box:
        for daemon in DAEMONS:
            sh(box, f"cat > /lib/systemd/system/{daemon}", UNIT)  # where packages put them
        sh(box, f"systemctl enable --now {' '.join(DAEMONS)}")
        sh(box, f"mkdir -p {Path(GOVERNORS).parent} && echo 'performance powersave' > {GOVERNORS}")
        assert states(box) == [["active", "enabled"], ["active", "enabled"]]

        rc, output = tune(tmp_path, box)
        assert rc != 0, output[-4000:]
        named = "tuned.service (active, enabled), power-profiles-daemon.service (active, enabled) set the CPU"
        assert named in output, output[-4000:]
        assert states(box) == [["active", "enabled"], ["active", "enabled"]]
        assert sh(box, "ls /etc/tmpfiles.d/ktinfra-tuning.conf /etc/security/limits.d/90-ktinfra.conf") == ""

        rc, output = tune(tmp_path, box, kt_host_tuning_governor_daemons="stop")
        assert rc == 0, output[-4000:]
        assert states(box) == [["inactive", "masked"], ["inactive", "masked"]], output[-4000:]
        assert "scaling_governor - - - - performance" in sh(box, "cat /etc/tmpfiles.d/ktinfra-tuning.conf")
        start = subprocess.run(["docker", "exec", box, "systemctl", "start", DAEMONS[1]], capture_output=True,
                               text=True)  # fmt: skip
        assert start.returncode != 0 and "masked" in start.stderr, start.stderr

        rc, output = tune(tmp_path, box, kt_host_tuning_governor_daemons="stop")
        assert rc == 0 and "changed=0" in output, output[-4000:]
