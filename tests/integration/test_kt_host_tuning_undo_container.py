"""kt_host_tuning present, then absent, against a real systemd (the debian12-systemd container): the host ends
as it was.

The container is told it is no container (kt_preflight_facts), so the role persists as on a server: fstab's
/dev/shm line, sysctl.d, limits.d, tmpfiles.d, systemd's limits drop-in (re-executed). A stand-in tuned runs
and is enabled (masked with kt_host_tuning_governor_daemons=stop: a governors file stands in for cpufreq), a
stand-in ondemand.service is enabled (disabled by the role). Before, the role had no undo: all of this stayed.
Now absent puts it back: fstab byte for byte, the files gone, tuned unmasked and running again, ondemand
enabled, systemd's limits its own; the record is removed, and a second absent changes nothing.

A stand-in power-profiles-daemon, masked by the role too, is then unmasked and masked again by an admin:
absent unmasked it all the same; now it unmasks only the mask link the role made, so that one stays masked and
the message says so.
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
TUNED = """[Unit]
Description=stand-in for a daemon that sets the CPU governor
[Service]
ExecStart=/bin/sleep infinity
[Install]
WantedBy=multi-user.target
"""
ONDEMAND = TUNED.replace("a daemon that sets the CPU governor", "Ubuntu's set-cpufreq").replace(
    "ExecStart=/bin/sleep infinity", "Type=oneshot\nExecStart=/bin/true"
)
# a tab, odd spacing and no newline at the end: only a byte-for-byte restore gives it back
FSTAB = "# /etc/fstab: test\ntmpfs\t/dev/shm  tmpfs   defaults,noexec   0 0\n/dev/vdz9 /mnt/x ext4 noauto 0 2"
PPD = "power-profiles-daemon.service"
GOVERNORS = "/etc/ktinfra-test/scaling_available_governors"
WATCHED = (
    "/etc/sysctl.d/90-ktinfra.conf /etc/security/limits.d/90-ktinfra.conf "
    "/etc/tmpfiles.d/ktinfra-tuning.conf /etc/systemd/system.conf.d /var/lib/ktinfra"
)


def sh(box: str, script: str, stdin: str = "") -> str:
    command = ["docker", "exec", "-i", box, "sh", "-c", script]
    return subprocess.run(command, input=stdin, capture_output=True, text=True).stdout


def host_state(box: str) -> dict:
    units = "tuned.service ondemand.service"
    return {
        "fstab": sh(box, "base64 -w0 /etc/fstab"),
        "files": sh(box, f"ls -d {WATCHED} 2>/dev/null"),
        "units": sh(box, f"systemctl is-active {units}; systemctl is-enabled {units}").split(),
        "limits": sh(box, "systemctl show -p DefaultLimitNOFILE -p DefaultLimitMEMLOCK"),
    }


def tune(tmp: Path, box: str, state: str) -> tuple[int, str]:
    extra = {"kt_preflight_facts": {"container": False}, "kt_host_tuning_cpu_governor": "performance",
             "kt_host_tuning_governors_file": GOVERNORS, "kt_host_tuning_governor_daemons": "stop",
             "kt_host_tuning_shm_size": "2G", "kt_host_tuning_state": state}  # fmt: skip
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


def test_present_then_absent_leaves_the_host_as_it_was(tmp_path):
    with systemd_box("kt-tuning-undo") as box:
        sh(box, "cat > /lib/systemd/system/tuned.service", TUNED)
        sh(box, "cat > /lib/systemd/system/ondemand.service", ONDEMAND)
        sh(box, f"cat > /lib/systemd/system/{PPD}", TUNED)
        sh(box, f"systemctl enable --now tuned.service {PPD} && systemctl enable ondemand.service")
        sh(box, f"mkdir -p {Path(GOVERNORS).parent} && echo 'performance powersave' > {GOVERNORS}")
        sh(box, "cat > /etc/fstab", FSTAB)
        before = host_state(box)
        assert before["units"] == ["active", "inactive", "enabled", "enabled"], before
        assert before["files"] == "", before

        rc, output = tune(tmp_path, box, "present")
        assert rc == 0, output[-4000:]
        tuned = host_state(box)
        assert tuned["units"] == ["inactive", "inactive", "masked", "disabled"], tuned
        assert sh(box, f"systemctl is-enabled {PPD}") == "masked\n"
        assert tuned["fstab"] != before["fstab"] and tuned["limits"] != before["limits"], tuned
        assert sh(box, "stat -c %a /var/lib/ktinfra/host-tuning.json") == "600\n"
        recorded = sh(box, "cat /var/lib/ktinfra/host-tuning.json")

        rc, output = tune(tmp_path, box, "present")
        assert rc == 0 and "changed=0" in output, output[-4000:]
        assert sh(box, "cat /var/lib/ktinfra/host-tuning.json") == recorded  # the first run's originals

        sh(box, f"systemctl unmask {PPD} && sleep 0.1 && systemctl mask {PPD}")  # an admin's own mask
        rc, output = tune(tmp_path, box, "absent")
        assert rc == 0, output[-4000:]
        assert host_state(box) == before, output[-4000:]
        assert sh(box, f"systemctl is-enabled {PPD}") == "masked\n", output[-4000:]
        assert f"{PPD} stays masked (masked again since the role did)" in output, output[-4000:]
        assert sh(box, "cat /etc/fstab") == FSTAB

        rc, output = tune(tmp_path, box, "absent")
        assert rc == 0 and "changed=0" in output, output[-4000:]
        assert "nothing to undo" in output, output[-4000:]
