"""kt_host_tuning: TLP, auto-cpufreq and cpupower.service also set the CPU governor after the role.

TLP writes CPU_SCALING_GOVERNOR_ON_AC/BAT (where its config sets them) at boot and on power-source changes
(its tlp-pd.service at each power-profile change), auto-cpufreq's daemon sets its governor every 2 s, and
cpupower.service (Arch, Fedora) is a oneshot that applies its config's governor at every boot: the check
knew tuned and power-profiles-daemon only, so with any of these the role wrote `performance`, reported it
applied, and it held until their next write. Now each running or enabled one is refused before any change
like tuned, with why; an enabled oneshot that has not run (inactive) counts. thermald changes
scaling_max_freq, never the governor, and is not asked about. TLP and cpupower are given configs that set a
governor here (without one they are not refused: test_kt_host_tuning_governor_config.py).

Same stand-in systemctl and cpufreq directory as test_kt_host_tuning_governor_daemons.py.
"""

from __future__ import annotations

import pytest
from test_kt_host_tuning_governor_daemons import RUNNING, tune

ONESHOT_NOT_RUN = "LoadState=loaded\nUnitFileState=enabled\nActiveState=inactive\nFragmentPath=/usr/lib/x\n"


def governor_configs(tmp) -> None:
    """TLP's and cpupower's configs setting a governor (without one they are not asked about:
    test_kt_host_tuning_governor_config.py), where tune() has the role read them."""
    (tmp / "tlp").mkdir(exist_ok=True)
    (tmp / "tlp" / "tlp.conf").write_text("TLP_ENABLE=1\nCPU_SCALING_GOVERNOR_ON_AC=powersave\n")
    (tmp / "cpupower").write_text("governor='ondemand'\n")


@pytest.mark.parametrize(
    ("units", "named", "why"),
    [# slow: TLP and auto-cpufreq refused by name, nothing changed, in a real systemd:
     # tests/integration/test_host_tuning_review6_governor_daemons.py's
     # test_tlp_auto_cpufreq_and_cpupower_are_refused_then_masked_and_thermald_is_left
     pytest.param({"tlp.service": RUNNING, "auto-cpufreq.service": RUNNING},
                  "tlp.service (active, enabled), auto-cpufreq.service (active, enabled) set the CPU governor"
                  " itself",
                  "tlp: CPU_SCALING_GOVERNOR_ON_AC/BAT where its config sets them", marks=pytest.mark.slow),
     # slow: an enabled cpupower.service that has not run refused, in a real systemd:
     # tests/integration/test_host_tuning_review6_governor_daemons.py's
     # test_tlp_auto_cpufreq_and_cpupower_are_refused_then_masked_and_thermald_is_left
     pytest.param({"cpupower.service": ONESHOT_NOT_RUN},
                  "cpupower.service (inactive, enabled) sets the CPU governor itself",
                  "cpupower: the governor of /etc/default/cpupower-service.conf (Arch) or "
                  "/etc/sysconfig/cpupower",
                  marks=pytest.mark.slow),
     ({"tlp-pd.service": "LoadState=loaded\nUnitFileState=enabled\nActiveState=inactive\n"},
      "tlp-pd.service (inactive, enabled) sets the CPU governor itself",
      "tlp-pd: TLP's power-profiles service (TLP 1.9+, D-Bus activated): tlp performance/balanced"),
     ({"snap.auto-cpufreq.service.service": RUNNING},
      "snap.auto-cpufreq.service.service (active, enabled) sets the CPU governor itself",
      "snap.auto-cpufreq.service: auto-cpufreq's snap, its charger or battery governor every 2 s")],
)  # fmt: skip
def test_tlp_auto_cpufreq_and_cpupower_are_refused_before_anything_changes(tmp_path, units, named, why):
    """Before: none of them was asked about; the governor was written and reported applied."""
    governor_configs(tmp_path)
    rc, output, calls, governor = tune(tmp_path, units)
    assert rc != 0, output[-3000:]
    message = " ".join(output.split())  # the failure message is folded over lines
    assert named in message and why in message, output[-3000:]
    assert "nothing was changed" in message
    assert calls == [] and governor == "powersave"
    assert not (tmp_path / "tuning.json").exists()


def test_with_stop_the_new_daemons_are_masked_before_the_governor_is_set(tmp_path):
    units = {"tlp.service": RUNNING, "auto-cpufreq.service": RUNNING, "cpupower.service": ONESHOT_NOT_RUN}
    governor_configs(tmp_path)
    rc, output, calls, governor = tune(tmp_path, units, {"kt_host_tuning_governor_daemons": "stop"})
    assert rc == 0, output[-3000:]
    assert calls == [f"mask --now {unit}" for unit in units]
    assert governor == "performance"


# slow: thermald running and enabled is not named and is left running, in a real systemd:
# tests/integration/test_host_tuning_review6_governor_daemons.py's
# test_tlp_auto_cpufreq_and_cpupower_are_refused_then_masked_and_thermald_is_left
@pytest.mark.slow
def test_thermald_running_is_not_a_governor_daemon(tmp_path):
    rc, output, calls, governor = tune(tmp_path, {"thermald.service": RUNNING})
    assert rc == 0, output[-3000:]
    assert calls == [] and governor == "performance"
