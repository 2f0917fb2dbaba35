"""kt_host_tuning: a run the governor daemon check refuses writes nothing, the undo record included.

The record (kt_host_tuning_state_file, /var/lib/ktinfra/host-tuning.json) was written in tasks/main.yml before
runtime.yml included governor_daemons.yml, whose refusals (a daemon that sets the governor with the default
refuse; with stop, TLP's sleep hook or a unit file in /etc that mask cannot replace) say "nothing was
changed": the refused run left host-tuning.json (and its folder) on the host. Every check that can stop the
run now comes before the record.

The play is tasks/main.yml's present steps up to persist.yml (test_kt_host_tuning_record.main_steps) with
every path they read or write in tmp_path: the stand-in systemctl and the TLP, udev and sleep-hook folders of
test_kt_host_tuning_governor_daemons.py, sysctls, cpufreq, limits.d, sysctl.d, the report and the record.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from role_play import ROLES, run_play
from test_kt_host_tuning_governor_config import GOVERNOR_CONF, write
from test_kt_host_tuning_governor_daemons import RUNNING, SYSTEMCTL, config_paths
from test_kt_host_tuning_record import GOVERNORS, LIBRARY, main_steps
from test_kt_host_tuning_sleep_hook import HOOK

ROLE = ROLES / "kt_host_tuning"
# what the play itself leaves in tmp: run_play's playbook and vars, the stand-in systemctl's log
PLAY_FILES = {"play.yml", "vars.json", "systemctl.log"}
# a unit file where the mask link goes, kt_host_tuning__unit_dir (config_paths: tmp/unit-links; before
# db5b709 any FragmentPath under /etc/ counted, and this case named /etc/systemd/system)
IN_UNIT_DIR = RUNNING.replace("/lib/systemd/system/x", "{tmp}/unit-links/tuned.service")


def host(tmp: Path, units: dict[str, str], files: dict[str, str]) -> None:
    """The host's stand-ins in tmp: swappiness 60, two CPUs on powersave (cpufreq offers performance), the
    daemons' `systemctl show` answers, TLP's config and hooks, empty limits.d and sysctl.d."""
    (tmp / "sys" / "vm").mkdir(parents=True)
    (tmp / "sys" / "vm" / "swappiness").write_text("60\n")
    for cpu in ("cpu0", "cpu1"):
        (tmp / "cpu" / cpu / "cpufreq").mkdir(parents=True)
        (tmp / "cpu" / cpu / "cpufreq" / "scaling_governor").write_text("powersave\n")
    (tmp / "cpu" / "cpu0" / "cpufreq" / GOVERNORS).write_text("performance powersave\n")
    for folder in ("units", "limits.d", "sysctl.d", "bin"):
        (tmp / folder).mkdir()
    for unit, state in units.items():
        (tmp / "units" / unit).write_text(state)
    write(tmp, files)
    for hook in (tmp / "sleep").rglob("*") if (tmp / "sleep").exists() else []:
        hook.chmod(0o755)
    (tmp / "bin" / "systemctl").write_text(SYSTEMCTL.format(log=tmp / "systemctl.log", units=tmp / "units"))
    (tmp / "bin" / "systemctl").chmod(0o755)


def tune(tmp: Path, daemons: str) -> tuple[int, str]:
    extra = {
        "role_path": str(ROLE), "kt_preflight_facts": {"container": False},
        "kt_host_tuning_sysctls": {"vm.swappiness": 10}, "kt_host_tuning_thp": "",
        "kt_host_tuning_shm_size": "",
        "kt_host_tuning_cpu_governor": "performance", "kt_host_tuning_governor_daemons": daemons,
        "kt_host_tuning_governors_file": str(tmp / "cpu" / "cpu0" / "cpufreq" / GOVERNORS),
        "kt_host_tuning_report_file": str(tmp / "state" / "tuning.json"),
        "kt_host_tuning_state_file": str(tmp / "state" / "host-tuning.json"),
        "kt_host_tuning_limits_dir": str(tmp / "limits.d"),
        "kt_host_tuning_sysctl_dir": str(tmp / "sysctl.d"),
        "kt_host_tuning__sysctl_boot_dirs": [str(tmp / "sysctl.d")],
        "kt_host_tuning__sysctl_conf": str(tmp / "sysctl.conf"),
        "kt_host_tuning__sysctl_root": str(tmp / "sys"), "kt_host_tuning__cpu_root": str(tmp / "cpu"),
        **config_paths(tmp),
    }  # fmt: skip
    env = LIBRARY | {
        "PATH": f"{tmp / 'bin'}:{os.environ['PATH']}",
        "KT_TUNE_SYSCTL_ROOT": str(tmp / "sys"),
        "KT_TUNE_CPU_ROOT": str(tmp / "cpu"),
    }
    return run_play(tmp, main_steps(tmp), extra, env=env)


def files(tmp: Path) -> dict[str, str | None]:
    """Every path under tmp but the play's own, with a file's content (None for a folder)."""
    return {
        str(p.relative_to(tmp)): None if p.is_dir() else p.read_text()
        for p in sorted(tmp.rglob("*"))
        if p.relative_to(tmp).parts[0] not in PLAY_FILES
    }


@pytest.mark.parametrize(
    ("daemons", "units", "config", "refusal"),
    [# slow: the same refusal task (a governor daemon, the default refuse) as the tuned case
     pytest.param("refuse", {"tlp.service": RUNNING}, GOVERNOR_CONF,
                  "tlp.service (active, enabled) sets the CPU governor", marks=pytest.mark.slow),
     ("refuse", {"tuned.service": RUNNING}, {}, "tuned.service (active, enabled) sets the CPU governor"),
     ("stop", {"tlp.service": RUNNING}, GOVERNOR_CONF | {"sleep/systemd/tlp": HOOK},
      "sleep/systemd/tlp runs `tlp resume` after each resume"),
     ("stop", {"tuned.service": IN_UNIT_DIR}, {},
      "{tmp}/unit-links/tuned.service: systemctl mask cannot replace a unit file")],
    ids=["tlp-governor", "tuned", "stop-tlp-sleep-hook", "stop-unit-file-where-the-mask-goes"],
)  # fmt: skip
def test_a_refused_run_leaves_no_record_and_no_file(tmp_path, daemons, units, config, refusal):
    """Before: each refusal came after the record: state/host-tuning.json was left, 0600, with the host's
    values, while the message said nothing was changed."""
    units = {unit: state.replace("{tmp}", str(tmp_path)) for unit, state in units.items()}
    refusal = refusal.replace("{tmp}", str(tmp_path))
    host(tmp_path, units, config)
    before = files(tmp_path)
    rc, output = tune(tmp_path, daemons)
    assert rc != 0, output[-4000:]
    message = " ".join(output.split())
    assert refusal in message and "nothing was changed" in message, message[-4000:]
    assert not (tmp_path / "state" / "host-tuning.json").exists(), output[-4000:]
    assert files(tmp_path) == before
    shown = (tmp_path / "systemctl.log").read_text().splitlines()
    assert shown and all(call.startswith("show ") for call in shown)  # asked, nothing masked
