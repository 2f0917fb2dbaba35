"""kt_host_tuning against a real systemd: TLP and cpupower.service count only where their config sets a
governor, and TLP's udev rule, which runs `tlp auto` whatever tlp.service's state, is masked with it.

In the container: a stand-in tlp.service (oneshot, ran) with /etc/tlp.conf setting CPU_SCALING_GOVERNOR_ON_AC
and TLP's udev rule in /usr/lib/udev/rules.d, and an enabled cpupower.service whose /etc/default/cpupower has
its governor commented out (as Arch ships it). By default the role must fail before any change, naming
tlp.service and 85-tlp.rules but not cpupower; with kt_host_tuning_governor_daemons=stop tlp.service ends
masked, /etc/udev/rules.d/85-tlp.rules holds no rule, cpupower.service stays enabled, and a second run changes
nothing (no udevd in the container: the udev reload is skipped). Then TLP's sleep hook is installed: stop is
refused (no /etc file replaces a system-sleep hook) until TLP_ENABLE=0. Same container and play as
test_kt_host_tuning_governor_daemons.py.
"""

from __future__ import annotations

from pathlib import Path

from systemd_box import systemd_box
from test_kt_host_tuning_governor_daemons import GOVERNORS, sh, tune

ONESHOT = """[Unit]
Description=stand-in for a oneshot that sets the CPU governor at boot
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/true
[Install]
WantedBy=multi-user.target
"""
RULE = 'ACTION=="change", SUBSYSTEM=="power_supply", RUN+="/usr/sbin/tlp auto"\n'
MASK = "/etc/udev/rules.d/85-tlp.rules"
HOOK = "/usr/lib/systemd/system-sleep/tlp"


def states(box: str) -> dict[str, list[str]]:
    units = ("tlp.service", "cpupower.service")
    return {u: sh(box, f"systemctl is-active {u}; systemctl is-enabled {u}").split() for u in units}


def test_tlps_rule_is_masked_with_it_and_cpupower_without_a_governor_is_left(tmp_path):
    with systemd_box("kt-tuning-govconf") as box:
        for unit in ("tlp.service", "cpupower.service"):
            sh(box, f"cat > /lib/systemd/system/{unit}", ONESHOT)
        sh(box, "systemctl enable --now tlp.service && systemctl enable cpupower.service")
        sh(box, "systemctl stop cpupower.service")  # enabled, runs at the next boot
        sh(box, "cat > /etc/tlp.conf", "TLP_ENABLE=1\nCPU_SCALING_GOVERNOR_ON_AC=powersave\n")
        sh(box, "cat > /etc/default/cpupower", "#governor='ondemand'\n#max_freq=\"3GHz\"\n")
        sh(
            box,
            "mkdir -p /usr/lib/udev/rules.d /etc/udev/rules.d && cat > /usr/lib/udev/rules.d/85-tlp.rules",
            RULE,
        )
        sh(box, f"mkdir -p {Path(GOVERNORS).parent} && echo 'performance powersave' > {GOVERNORS}")
        before = {"tlp.service": ["active", "enabled"], "cpupower.service": ["inactive", "enabled"]}
        assert states(box) == before

        rc, output = tune(tmp_path, box)
        assert rc != 0, output[-4000:]
        message = " ".join(output.split())
        named = (
            "tlp.service (active, enabled), 85-tlp.rules (udev rule, /usr/lib/udev/rules.d/85-tlp.rules) set"
        )
        assert named in message and "/etc/tlp.conf line 2: CPU_SCALING_GOVERNOR_ON_AC=powersave" in message
        assert "cpupower.service (" not in message  # its config sets no governor
        assert states(box) == before and sh(box, f"ls {MASK}") == ""

        rc, output = tune(tmp_path, box, kt_host_tuning_governor_daemons="stop")
        assert rc == 0, output[-4000:]
        assert states(box) == {
            "tlp.service": ["inactive", "masked"],
            "cpupower.service": ["inactive", "enabled"],
        }
        mask = sh(box, f"cat {MASK}")
        assert mask.startswith("# kt_host_tuning: replaces /usr/lib/udev/rules.d/85-tlp.rules"), mask
        assert "RUN" not in mask
        assert "scaling_governor - - - - performance" in sh(box, "cat /etc/tmpfiles.d/ktinfra-tuning.conf")

        rc, output = tune(tmp_path, box, kt_host_tuning_governor_daemons="stop")
        assert rc == 0 and "changed=0" in output, output[-4000:]

        # TLP's sleep hook (Debian's tlp ships it in /lib/systemd/system-sleep, /usr/lib here): `tlp resume`
        # after each resume, masked or not, and nothing in /etc replaces it: stop is refused (TLP_ENABLE=0)
        hook = "#!/bin/sh\ncase $1 in post) tlp resume ;; esac\n"
        sh(box, f"mkdir -p {Path(HOOK).parent} && cat > {HOOK} && chmod 755 {HOOK}", hook)
        rc, output = tune(tmp_path, box, kt_host_tuning_governor_daemons="stop")
        assert rc != 0, output[-4000:]
        message = " ".join(output.split())
        assert f"{HOOK} runs `tlp resume`" in message and "TLP_ENABLE=0 in /etc/tlp.conf" in message, message
        sh(box, "sed -i s/TLP_ENABLE=1/TLP_ENABLE=0/ /etc/tlp.conf")
        rc, output = tune(tmp_path, box, kt_host_tuning_governor_daemons="stop")
        assert rc == 0, output[-4000:]
