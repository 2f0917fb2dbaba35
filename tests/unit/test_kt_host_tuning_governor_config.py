"""kt_host_tuning: TLP and cpupower.service count as governor daemons only where their config sets a governor,
and then TLP's udev rule counts too.

TLP writes CPU_SCALING_GOVERNOR_ON_AC/BAT/SAV only where its config sets them (tlp.conf ships them commented
out), cpupower.service the governor= of its config (Arch ships it commented out; Fedora's CPUPOWER_START_OPTS
has -g performance): the role refused both whenever they ran or were enabled, with no governor to fight.
auto-cpufreq always sets one and stays refused. Where TLP's config does set a governor, its udev rule
(85-tlp.rules: `tlp auto` at each power-source change) runs it whatever tlp.service's state, masked too: the
role now refuses it, and with kt_host_tuning_governor_daemons=stop masks it with a file of its name in
/etc/udev/rules.d that holds no rule.

Same stand-in systemctl and cpufreq directory as test_kt_host_tuning_governor_daemons.py; the configs and
udev's rules directories are in tmp_path (tune() points the role at them).
"""

from __future__ import annotations

import pytest
from test_kt_host_tuning_governor_daemons import RUNNING, tune

ONESHOT_NOT_RUN = "LoadState=loaded\nUnitFileState=enabled\nActiveState=inactive\nFragmentPath=/usr/lib/x\n"
RULE = 'ACTION=="change", SUBSYSTEM=="power_supply", RUN+="/usr/sbin/tlp auto"\n'
STOP = {"kt_host_tuning_governor_daemons": "stop"}


def write(tmp, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize(
    ("units", "files"),
    [# slow: a running tlp.service, no TLP config, with stop:
     # test_a_tlp_rule_without_a_governor_in_tlps_config_is_left
     pytest.param({"tlp.service": RUNNING}, {}, marks=pytest.mark.slow),
     ({"tlp.service": RUNNING, "tlp-pd.service": RUNNING},
      {"tlp/tlp.conf": "TLP_ENABLE=1\n#CPU_SCALING_GOVERNOR_ON_AC=performance\n"
                       "#CPU_SCALING_GOVERNOR_ON_BAT=powersave\n"}),
     ({"tlp.service": RUNNING},
      {"tlp/tlp.d/50-vendor.conf": "CPU_SCALING_GOVERNOR_ON_AC=powersave\n",
       "tlp/tlp.conf": 'CPU_SCALING_GOVERNOR_ON_AC=""\n'}),
     # slow: TLP_ENABLE=0 sets no governor, a running tlp.service stays, with stop:
     # test_kt_host_tuning_sleep_hook.py::test_the_hook_passes_where_tlp_sets_no_governor[tlp-disabled]
     pytest.param({"tlp.service": RUNNING},
                  {"tlp/tlp.conf": "TLP_ENABLE=0\nCPU_SCALING_GOVERNOR_ON_AC=powersave\n"},
                  marks=pytest.mark.slow),
     # slow: an enabled cpupower.service whose config comments its governor out, in a real systemd:
     # tests/integration/test_kt_host_tuning_governor_config.py's
     # test_tlps_rule_is_masked_with_it_and_cpupower_without_a_governor_is_left
     pytest.param({"cpupower.service": ONESHOT_NOT_RUN},
                  {"cpupower": "# governor='ondemand'\nmax_freq=\"3GHz\"\n"}, marks=pytest.mark.slow),
     ({"cpupower.service": ONESHOT_NOT_RUN},
      {"sysconfig-cpupower": 'CPUPOWER_START_OPTS="frequency-set -u 3GHz"\n'}),
     # slow: no governor line in cpupower's files (two of the three absent there too), in a real systemd:
     # tests/integration/test_kt_host_tuning_governor_config.py's
     # test_tlps_rule_is_masked_with_it_and_cpupower_without_a_governor_is_left
     pytest.param({"cpupower.service": ONESHOT_NOT_RUN}, {}, marks=pytest.mark.slow)],
    ids=["tlp-no-config", "tlp-commented", "tlp-emptied-later", "tlp-disabled", "cpupower-commented",
         "cpupower-no-governor-option", "cpupower-no-config"],
)  # fmt: skip
def test_tlp_and_cpupower_without_a_governor_in_their_config_are_left_running(tmp_path, units, files):
    """Before: refused as setting the governor, though their config set none."""
    write(tmp_path, files)
    rc, output, calls, governor = tune(tmp_path, units)
    assert rc == 0, output[-3000:]
    assert calls == [] and governor == "performance"


@pytest.mark.parametrize(
    ("units", "files", "named"),
    [({"tlp.service": RUNNING},
      {"tlp/tlp.d/50-vendor.conf": "\nCPU_SCALING_GOVERNOR_ON_BAT=powersave # saves\n"},
      "tlp: CPU_SCALING_GOVERNOR_ON_AC/BAT where its config sets them, at boot and, through its sleep hook, "
      "at each resume (masked too: TLP_ENABLE=0 in /etc/tlp.conf stops that) "
      "({tmp}/tlp/tlp.d/50-vendor.conf line 2: CPU_SCALING_GOVERNOR_ON_BAT=powersave)"),
     # slow: an enabled cpupower.service, governor='ondemand' in /etc/default/cpupower, refused in systemd:
     # tests/integration/test_host_tuning_review6_governor_daemons.py's
     # test_tlp_auto_cpufreq_and_cpupower_are_refused_then_masked_and_thermald_is_left
     pytest.param({"cpupower.service": ONESHOT_NOT_RUN}, {"cpupower": "governor='ondemand'\n"},
                  "({tmp}/cpupower line 1: governor=ondemand)", marks=pytest.mark.slow),
     ({"cpupower.service": ONESHOT_NOT_RUN},
      {"sysconfig-cpupower": 'CPUPOWER_START_OPTS="frequency-set -g performance"\n'},
      "({tmp}/sysconfig-cpupower line 1: CPUPOWER_START_OPTS=frequency-set -g performance)"),
     # slow: a running auto-cpufreq without any config, refused in a real systemd:
     # tests/integration/test_host_tuning_review6_governor_daemons.py's
     # test_tlp_auto_cpufreq_and_cpupower_are_refused_then_masked_and_thermald_is_left
     pytest.param({"auto-cpufreq.service": RUNNING}, {}, "auto-cpufreq: its charger or battery governor",
                  marks=pytest.mark.slow)],
    ids=["tlp", "cpupower-arch", "cpupower-fedora", "auto-cpufreq-always"],
)  # fmt: skip
def test_a_governor_in_their_config_is_refused_and_named(tmp_path, units, files, named):
    write(tmp_path, files)
    rc, output, calls, governor = tune(tmp_path, units)
    assert rc != 0, output[-3000:]
    message = " ".join(output.split())
    assert named.format(tmp=tmp_path) in message and "nothing was changed" in message, output[-3000:]
    assert calls == [] and governor == "powersave"


GOVERNOR_CONF = {"tlp/tlp.conf": "CPU_SCALING_GOVERNOR_ON_AC=powersave\n"}


# slow: TLP's rule refused, then masked with stop, as test_kt_host_tuning_renamed_tlp_files.py's
# test_a_renamed_udev_rule_that_runs_tlp_auto_is_refused_then_masked_with_stop; a rule masked in /etc passes
# the default refuse: test_a_rule_already_overridden_in_etc_or_without_a_tlp_governor_passes
@pytest.mark.slow
def test_tlps_udev_rule_is_refused_then_masked_with_stop(tmp_path):
    """Before: tlp.service masked (or disabled) was enough, and the rule's `tlp auto` set powersave again at
    the next power-source change. The rule runs whatever tlp.service's state, so it counts on its own."""
    write(
        tmp_path,
        GOVERNOR_CONF | {"udev/lib/85-tlp.rules": RULE, "udev/lib/85-tlp-rdw.rules": "# no tlp auto\n"},
    )
    (tmp_path / "udev" / "etc").mkdir()  # /etc/udev/rules.d, there wherever udev is
    disabled = {"tlp.service": "LoadState=loaded\nUnitFileState=disabled\nActiveState=inactive\n"}
    rc, output, calls, governor = tune(tmp_path, disabled)
    assert rc != 0, output[-3000:]
    message = " ".join(output.split())
    assert f"85-tlp.rules (udev rule, {tmp_path}/udev/lib/85-tlp.rules) sets the CPU governor" in message, (
        message
    )
    assert "85-tlp.rules: TLP's udev rule: tlp auto" in message and "85-tlp-rdw" not in message
    mask = tmp_path / "udev" / "etc" / "85-tlp.rules"
    assert calls == [] and governor == "powersave" and not mask.exists()

    rc, output, calls, governor = tune(tmp_path, disabled, STOP)
    assert rc == 0, output[-3000:]
    assert mask.read_text().startswith("# kt_host_tuning: replaces") and "RUN" not in mask.read_text()
    assert not (tmp_path / "udev" / "etc" / "85-tlp-rdw.rules").exists()
    assert calls == [] and governor == "performance"

    (tmp_path / "cpu" / "cpu0" / "cpufreq" / "scaling_governor").write_text("powersave\n")
    rc, output, calls, governor = tune(tmp_path, disabled)  # masked: the default refuse passes now
    assert rc == 0, output[-3000:]
    assert calls == [] and governor == "performance"


@pytest.mark.parametrize(
    "override",
    [
        # slow: a file of the rule's name in /etc, as the admin's override case below
        pytest.param("", marks=pytest.mark.slow),
        "# an admin's own override\n",
    ],
)
def test_a_rule_already_overridden_in_etc_or_without_a_tlp_governor_passes(tmp_path, override):
    write(tmp_path, GOVERNOR_CONF | {"udev/lib/85-tlp.rules": RULE, "udev/etc/85-tlp.rules": override})
    rc, output, calls, governor = tune(tmp_path, {})
    assert rc == 0, output[-3000:]
    assert governor == "performance" and (tmp_path / "udev" / "etc" / "85-tlp.rules").read_text() == override


def test_a_tlp_rule_without_a_governor_in_tlps_config_is_left(tmp_path):
    write(tmp_path, {"udev/lib/85-tlp.rules": RULE})
    rc, output, calls, governor = tune(tmp_path, {"tlp.service": RUNNING}, STOP)
    assert rc == 0, output[-3000:]
    assert calls == [] and governor == "performance" and not (tmp_path / "udev" / "etc").exists()


def test_with_stop_a_rule_that_lives_in_etc_is_refused_first(tmp_path):
    """A file of its own name cannot replace it: refused before tlp.service is masked, like a unit file in
    /etc/systemd/system."""
    write(tmp_path, GOVERNOR_CONF | {"udev/etc/85-tlp.rules": RULE})
    rc, output, calls, governor = tune(tmp_path, {"tlp.service": RUNNING}, STOP)
    assert rc != 0, output[-3000:]
    message = " ".join(output.split())
    assert f"{tmp_path}/udev/etc/85-tlp.rules: systemctl mask cannot replace" in message, message
    assert calls == [] and governor == "powersave"
    assert (tmp_path / "udev" / "etc" / "85-tlp.rules").read_text() == RULE
