"""kt_host_tuning in a docker container (read-only /proc/sys, as on AutoDL) whose image sets a sysctl in a
sysctl.d file read after 90-ktinfra.conf.

The boot-order check (library/kt_sysctl_overrides.py) stopped the play there: "would hold until the next
reboot only". In such a container nothing applies sysctl.d at its start (systemd-sysctl needs /proc/sys
writable), the host's values are in force and kt-tune.sh reports ours not_set: the play failed for nothing.
Now it says why the file changes nothing and goes on; the report still says not_set with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


def test_a_later_image_file_does_not_stop_the_play_where_proc_sys_is_read_only(tmp_path):
    box = f"kt-tuning-ro-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", box, IMAGE, "sleep", "infinity")
    try:
        docker("exec", box, "sh", "-c", "echo 'vm.swappiness = 60' > /etc/sysctl.d/99-image.conf")
        play = [{"hosts": "all", "roles": [{"role": "kt_host_tuning"}],
                 "vars": {"kt_preflight_facts": {"container": True}}}]  # fmt: skip
        (tmp_path / "play.yml").write_text(json.dumps(play))
        (tmp_path / "hosts").write_text(
            f"{box} ansible_connection=community.docker.docker ansible_python_interpreter=/usr/bin/python3\n"
        )
        env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"))
        env.pop("ANSIBLE_STDOUT_CALLBACK", None)
        command = [ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "hosts"), str(tmp_path / "play.yml")]
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output[-4000:]
        assert "/proc/sys is read-only here (a container)" in output
        assert "/etc/sysctl.d/99-image.conf setting vm.swappiness to another value changes nothing" in output
        report = json.loads(docker("exec", box, "cat", "/var/lib/ktinfra/tuning.json"))
        swappiness = next(s for s in report["settings"] if s["setting"] == "vm.swappiness")
        assert swappiness["status"] == "not_set" and "Read-only file system" in swappiness["reason"], report
    finally:
        subprocess.run(["docker", "rm", "-f", box], capture_output=True)
