"""kt_host_tuning against a real systemd: TLP, auto-cpufreq and cpupower.service, which set the CPU governor
again after the role (TLP and cpupower.service are oneshots: TLP's stays active after it ran, cpupower's is
enabled and shows inactive until the next boot runs it), and thermald, which does not set the governor.

By default the role must fail before any change, naming the three, and leave them as they were; with
kt_host_tuning_governor_daemons=stop the three end inactive and masked, thermald keeps running, and a second
run changes nothing. Same container and play as test_kt_host_tuning_governor_daemons.py.
"""

from __future__ import annotations

from pathlib import Path

from systemd_box import systemd_box
from test_kt_host_tuning_governor_daemons import GOVERNORS, sh, tune

ONESHOT = """[Unit]
Description=stand-in for a oneshot that sets the CPU governor at boot
[Service]
Type=oneshot
{remain}
ExecStart=/bin/true
[Install]
WantedBy=multi-user.target
"""
SIMPLE = """[Unit]
Description=stand-in for a daemon
[Service]
ExecStart=/bin/sleep infinity
[Install]
WantedBy=multi-user.target
"""
UNITS = {
    "tlp.service": ONESHOT.format(remain="RemainAfterExit=yes"),
    "auto-cpufreq.service": SIMPLE,
    "cpupower.service": ONESHOT.format(remain=""),
    "thermald.service": SIMPLE,
}


def states(box: str) -> dict[str, list[str]]:
    return {u: sh(box, f"systemctl is-active {u}; systemctl is-enabled {u}").split() for u in UNITS}


def test_tlp_auto_cpufreq_and_cpupower_are_refused_then_masked_and_thermald_is_left(tmp_path):
    with systemd_box("kt-tuning-review6") as box:
        for unit, text in UNITS.items():
            sh(box, f"cat > /lib/systemd/system/{unit}", text)
        sh(box, "systemctl enable --now tlp.service auto-cpufreq.service thermald.service")
        sh(box, "systemctl enable cpupower.service")  # runs at the next boot only
        sh(box, f"mkdir -p {Path(GOVERNORS).parent} && echo 'performance powersave' > {GOVERNORS}")
        # since 44ccfc6 TLP and cpupower count only where their config sets a governor
        sh(box, "cat > /etc/tlp.conf", "CPU_SCALING_GOVERNOR_ON_AC=powersave\n")
        sh(box, "mkdir -p /etc/default && cat > /etc/default/cpupower", "governor='ondemand'\n")
        before = {
            "tlp.service": ["active", "enabled"],
            "auto-cpufreq.service": ["active", "enabled"],
            "cpupower.service": ["inactive", "enabled"],
            "thermald.service": ["active", "enabled"],
        }
        assert states(box) == before

        rc, output = tune(tmp_path, box)
        assert rc != 0, output[-4000:]
        named = (
            "tlp.service (active, enabled), auto-cpufreq.service (active, enabled),"
            " cpupower.service (inactive, enabled) set the CPU governor itself"
            " (tlp: CPU_SCALING_GOVERNOR_ON_AC/BAT"
        )
        assert named in " ".join(output.split()), output[-4000:]
        assert "thermald" not in output
        assert states(box) == before
        assert sh(box, "ls /etc/tmpfiles.d/ktinfra-tuning.conf /etc/security/limits.d/90-ktinfra.conf") == ""

        rc, output = tune(tmp_path, box, kt_host_tuning_governor_daemons="stop")
        assert rc == 0, output[-4000:]
        masked = ["inactive", "masked"]
        after = {"tlp.service": masked, "auto-cpufreq.service": masked, "cpupower.service": masked}
        assert states(box) == after | {"thermald.service": ["active", "enabled"]}, output[-4000:]
        assert "scaling_governor - - - - performance" in sh(box, "cat /etc/tmpfiles.d/ktinfra-tuning.conf")

        rc, output = tune(tmp_path, box, kt_host_tuning_governor_daemons="stop")
        assert rc == 0 and "changed=0" in output, output[-4000:]
