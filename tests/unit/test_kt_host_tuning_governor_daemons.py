"""kt_host_tuning: tuned and power-profiles-daemon, which set the CPU governor again after the role.

tuned applies its profile's governor at every start; power-profiles-daemon (intel_pstate/amd_pstate active
mode) writes powersave to every policy at its start and powersave/performance on each profile change,
AC/battery switch and resume: the `performance` the run reported applied held until then only. Now, where a
governor is asked for and cpufreq exists, either one running or enabled fails the play before any change
(kt_host_tuning_governor_daemons=refuse, the default) or is masked and stopped before the governor
is written (=stop).

The play is the role's task files that tasks/main.yml includes, in its order and with its conditions
(validate, the daemon check, runtime; public, for the role's vars those conditions read), with every other
setting empty, cpufreq a directory in tmp_path (KT_TUNE_CPU_ROOT) and `systemctl` a stand-in on PATH that
answers `show` from tmp_path/units/<unit> and logs every call: this host's systemd is never asked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from role_play import ROLES, run_play

SYSTEMCTL = """#!/bin/sh
echo "$*" >> "{log}"
# mask --now: the /dev/null link systemctl makes, in config_paths' kt_host_tuning__unit_dir
links="{units}/../unit-links"
[ "$1 $2" = "mask --now" ] && {{ mkdir -p "$links"; ln -s /dev/null "$links/$3"; }}
# only the one query the role makes is answered: a changed argv (one YAML flow list split the properties
# into three arguments, and systemd answered LoadState=not-found three times) finds no daemon
[ "$1 $2 $#" = "show --property=LoadState,UnitFileState,ActiveState,FragmentPath 3" ] || exit 0
cat "{units}/$3" 2>/dev/null || printf 'LoadState=not-found\\nUnitFileState=\\nActiveState=inactive\\n'
"""
RUNNING = "LoadState=loaded\nUnitFileState=enabled\nActiveState=active\nFragmentPath=/lib/systemd/system/x\n"


def config_paths(tmp: Path) -> dict:
    """TLP's and cpupower's configs, udev's rules, sleep hooks, mask links: in tmp, never this host's."""
    tlp = [str(tmp / "tlp" / name) for name in ("defaults.conf", "tlp.d/*.conf", "tlp.conf")]
    return {
        "kt_host_tuning__tlp_confs": tlp,
        "kt_host_tuning__cpupower_confs": [str(tmp / "cpupower"), str(tmp / "sysconfig-cpupower")],
        "kt_host_tuning__udev_rule_dirs": [str(tmp / "udev" / "etc"), str(tmp / "udev" / "lib")],
        "kt_host_tuning__sleep_hook_dirs": [str(tmp / "sleep" / "systemd"), str(tmp / "sleep" / "elogind")],
        "kt_host_tuning__udev_control": str(tmp / "udev" / "control"),  # absent: no udevd asked
        "kt_host_tuning__unit_dir": str(tmp / "unit-links"),  # the mask links: this host's are never read
    }


def included_steps() -> list:
    """tasks/main.yml's included task files (its present block), in its order, with their conditions."""
    main = yaml.safe_load((ROLES / "kt_host_tuning" / "tasks" / "main.yml").read_text())
    block = next(step["block"] for step in main if "block" in step)
    return [
        {"ansible.builtin.include_role": {"name": "kt_host_tuning", "tasks_from": name[:-4], "public": True}}
        | ({"when": step["when"]} if "when" in step else {})
        for step in block
        if (name := step.get("ansible.builtin.include_tasks"))
    ]


def tune(tmp: Path, units: dict[str, str], extra: dict | None = None) -> tuple[int, str, list[str], str]:
    """rc, output, the systemctl calls other than show, and cpu0's governor afterwards."""
    bin_dir, unit_dir, cpu = tmp / "bin", tmp / "units", tmp / "cpu" / "cpu0" / "cpufreq"
    for folder in (bin_dir, unit_dir, cpu):
        folder.mkdir(parents=True, exist_ok=True)
    log = tmp / "systemctl.log"
    (bin_dir / "systemctl").write_text(SYSTEMCTL.format(log=log, units=unit_dir))
    (bin_dir / "systemctl").chmod(0o755)
    for unit, state in units.items():
        (unit_dir / unit).write_text(state)
    (cpu / "scaling_governor").write_text("powersave\n")
    (cpu / "scaling_available_governors").write_text("performance powersave\n")
    tasks = included_steps()
    role_vars = {
        "kt_host_tuning_cpu_governor": "performance", "kt_host_tuning_sysctls": {}, "kt_host_tuning_thp": "",
        "kt_host_tuning_shm_size": "", "kt_host_tuning_report_file": str(tmp / "tuning.json"),
        "kt_host_tuning_governors_file": str(cpu / "scaling_available_governors"),
        "kt_preflight_facts": {"container": False},
        **config_paths(tmp),
    }  # fmt: skip
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "KT_TUNE_CPU_ROOT": str(tmp / "cpu")}
    rc, output = run_play(tmp, tasks, role_vars | (extra or {}), env=env)
    calls = [c for c in log.read_text().splitlines() if not c.startswith("show")] if log.exists() else []
    return rc, output, calls, (cpu / "scaling_governor").read_text().strip()


@pytest.mark.parametrize(
    ("units", "named"),
    [# slow: the same refusal of a running tuned, nothing written, in
     # test_kt_host_tuning_refused_writes_nothing.py::test_a_refused_run_leaves_no_record_and_no_file[tuned]
     pytest.param({"tuned.service": RUNNING}, "tuned.service (active, enabled) sets the CPU governor",
                  marks=pytest.mark.slow),
     # slow: an enabled, inactive unit counts: tlp-pd.service's case of
     # test_host_tuning_review6_governor_daemons.py's
     # test_tlp_auto_cpufreq_and_cpupower_are_refused_before_anything_changes
     pytest.param({"power-profiles-daemon.service":
                   "LoadState=loaded\nUnitFileState=enabled\nActiveState=inactive\n"},
                  "power-profiles-daemon.service (inactive, enabled) sets the CPU governor",
                  marks=pytest.mark.slow),
     ({"tuned.service": "LoadState=loaded\nUnitFileState=disabled\nActiveState=active\n",
       "power-profiles-daemon.service": RUNNING},
      "tuned.service (active, disabled), power-profiles-daemon.service (active, enabled) set the CPU")],
)  # fmt: skip
def test_a_daemon_that_resets_the_governor_is_refused_before_anything_changes(tmp_path, units, named):
    """Before: the governor was written and reported applied; tuned/ppd put theirs back at the next start."""
    rc, output, calls, governor = tune(tmp_path, units)
    assert rc != 0, output[-3000:]
    assert named in output, output[-3000:]
    assert "kt_host_tuning_governor_daemons=stop" in output and "nothing was changed" in output
    assert calls == [] and governor == "powersave"
    assert not (tmp_path / "tuning.json").exists()


# slow: mask --now of each, then the governor, as test_host_tuning_review6_governor_daemons.py's
# test_with_stop_the_new_daemons_are_masked_before_the_governor_is_set; tuned and power-profiles-daemon masked
# in a real systemd: tests/integration/test_kt_host_tuning_governor_daemons.py
@pytest.mark.slow
def test_with_stop_they_are_masked_and_stopped_before_the_governor_is_set(tmp_path):
    units = {"tuned.service": RUNNING, "power-profiles-daemon.service": RUNNING}
    rc, output, calls, governor = tune(tmp_path, units, {"kt_host_tuning_governor_daemons": "stop"})
    assert rc == 0, output[-3000:]
    assert calls == ["mask --now tuned.service", "mask --now power-profiles-daemon.service"]
    assert governor == "performance"
    report = json.loads((tmp_path / "tuning.json").read_text())["settings"]
    governor_set = {"setting": "scaling_governor", "wanted": "performance", "reason": "", "status": "applied"}
    assert governor_set in report


@pytest.mark.parametrize(
    "state",
    ["LoadState=masked\nUnitFileState=masked\nActiveState=inactive\n",
     "LoadState=loaded\nUnitFileState=disabled\nActiveState=inactive\n",
     # slow: every daemon not installed, the default refuse passes: test_kt_host_tuning_governor_config.py's
     # test_a_rule_already_overridden_in_etc_or_without_a_tlp_governor_passes (no unit there at all)
     pytest.param(None, marks=pytest.mark.slow)],
)  # fmt: skip
def test_a_stopped_disabled_masked_or_missing_daemon_passes(tmp_path, state):
    rc, output, calls, governor = tune(tmp_path, {"tuned.service": state} if state else {})
    assert rc == 0, output[-3000:]
    assert calls == [] and governor == "performance"


@pytest.mark.parametrize(
    "extra",
    [{"kt_host_tuning_cpu_governor": ""}, {"kt_preflight_facts": {"container": True}},
     {"kt_host_tuning_governors_file": "/nonexistent/scaling_available_governors"}],
)  # fmt: skip
def test_no_governor_a_container_or_no_cpufreq_asks_nothing(tmp_path, extra):
    """The daemons only matter where the role writes a governor: asked for, on a host, with cpufreq."""
    rc, output, calls, _ = tune(tmp_path, {"tuned.service": RUNNING}, extra)
    assert rc == 0, output[-3000:]
    assert calls == [] and not (tmp_path / "systemctl.log").exists()


# slow: the same refusal (message, only `systemctl show` asked, the governor and every file as they were) in
# test_kt_host_tuning_refused_writes_nothing.py's
# test_a_refused_run_leaves_no_record_and_no_file[stop-unit-file-where-the-mask-goes]
@pytest.mark.slow
def test_with_stop_a_unit_file_where_the_mask_goes_is_refused_first(tmp_path):
    """systemctl mask fails on /etc/systemd/system/<unit> itself (File ... already exists): found in the real
    systemd container with a stand-in unit there; the play stopped one daemon and failed on masking. The
    folder is kt_host_tuning__unit_dir (config_paths: in tmp_path); before, `fixed` was any FragmentPath
    under /etc/, so a unit file in that folder was masked over."""
    own_file = tmp_path / "unit-links" / "tuned.service"
    units = {"tuned.service": RUNNING.replace("/lib/systemd/system/x", str(own_file)),
             "power-profiles-daemon.service": RUNNING}  # fmt: skip
    rc, output, calls, governor = tune(tmp_path, units, {"kt_host_tuning_governor_daemons": "stop"})
    assert rc != 0, output[-3000:]
    assert f"{own_file}: systemctl mask cannot replace a unit file" in output, output[-3000:]
    assert "nothing was changed" in output and calls == [] and governor == "powersave"
