"""kt_host_tuning records what it changes, as the host had it, before it changes it
(library/kt_tuning_record.py): the files it writes, fstab's /dev/shm lines, the runtime values, the units it
masks or disables. Before, it kept no record: nothing could say what the host had before, nor put it back. A
rerun must keep the first record, not replace it with the values the first run tuned.

The module runs by real ansible on localhost, reading only directories in tmp_path; the role's steps
(tasks/main.yml up to its runtime settings) run with every path they read or write in tmp_path and a
stand-in systemctl.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import yaml
from role_play import ROLES, run_play
from test_kt_host_tuning_governor_daemons import RUNNING, SYSTEMCTL, config_paths

ROLE = ROLES / "kt_host_tuning"


def present_steps() -> list:
    """tasks/main.yml's steps of kt_host_tuning_state=present (its block), in their order."""
    main = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    return next(step["block"] for step in main if "block" in step)


LIBRARY = {"ANSIBLE_LIBRARY": str(ROLE / "library")}
GOVERNORS = "scaling_available_governors"
FSTAB = "# static\nUUID=1 / ext4 defaults 0 1\ntmpfs  /dev/shm\ttmpfs  defaults,noexec  0 0\n"


def host(tmp: Path) -> dict:
    """Stand-ins of the host's values and files, in tmp; the module's arguments that point at them."""
    (tmp / "sys" / "vm").mkdir(parents=True)
    (tmp / "sys" / "vm" / "swappiness").write_text("60\n")
    (tmp / "thp").write_text("[always] madvise never\n")
    for cpu in ("cpu0", "cpu1"):
        (tmp / "cpu" / cpu / "cpufreq").mkdir(parents=True)
        (tmp / "cpu" / cpu / "cpufreq" / "scaling_governor").write_text("powersave\n")
    (tmp / "fstab").write_text(FSTAB)
    (tmp / "own.conf").write_text("kept\n")
    (tmp / "own.conf").chmod(0o640)
    return {
        "path": str(tmp / "state" / "host-tuning.json"), "sysctls": ["vm.swappiness"],
        "sysctl_root": str(tmp / "sys"), "thp_path": str(tmp / "thp"), "cpu_root": str(tmp / "cpu"),
        "shm_path": str(tmp), "fstab": str(tmp / "fstab"),
        "files": [str(tmp / "own.conf"), str(tmp / "new.conf")], "dirs": [str(tmp / "made")],
        "masked": [{"unit": "tuned.service", "active": "active", "enabled": "enabled"}],
        "disabled": ["ondemand.service"],
    }  # fmt: skip


def record(tmp: Path, args: dict) -> tuple[int, str]:
    return run_play(tmp, [{"kt_tuning_record": args}], env=LIBRARY)


def test_the_record_holds_what_the_host_had_and_a_rerun_keeps_it(tmp_path):
    args = host(tmp_path)
    rc, output = record(tmp_path, args)
    assert rc == 0 and "changed=1" in output, output[-3000:]
    state = Path(args["path"])
    assert state.stat().st_mode & 0o777 == 0o600
    first = json.loads(state.read_text())
    sysctl = str(tmp_path / "sys" / "vm" / "swappiness")
    cpu0 = str(tmp_path / "cpu" / "cpu0" / "cpufreq" / "scaling_governor")
    assert first["runtime"][sysctl] == {"setting": "vm.swappiness", "value": "60"}
    assert first["runtime"][str(tmp_path / "thp")] == {"setting": "thp", "value": "always"}
    assert first["runtime"][cpu0] == {"setting": "governor", "value": "powersave"}
    assert first["runtime"][str(tmp_path)]["value"] > 0  # the tmpfs size, in bytes
    assert first["files"] == {
        str(tmp_path / "own.conf"): {"content": base64.b64encode(b"kept\n").decode(), "mode": "0640"},
        str(tmp_path / "new.conf"): None,
    }
    assert first["dirs"] == {str(tmp_path / "made"): False}
    assert first["fstab"]["shm_lines"] == ["tmpfs  /dev/shm\ttmpfs  defaults,noexec  0 0"]
    assert base64.b64decode(first["fstab"]["original"]["content"]).decode() == FSTAB
    assert first["masked"] == {"tuned.service": {"active": "active", "enabled": "enabled"}}
    assert first["disabled"] == {"ondemand.service": {"enabled": "enabled"}}

    # what the first run then tuned: the rerun finds these and must keep the originals
    (tmp_path / "sys" / "vm" / "swappiness").write_text("10\n")
    (tmp_path / "thp").write_text("always [madvise] never\n")
    (tmp_path / "cpu" / "cpu0" / "cpufreq" / "scaling_governor").write_text("performance\n")
    (tmp_path / "fstab").write_text(FSTAB.replace("defaults,noexec  0 0", "defaults,noexec,size=75% 0 0"))
    (tmp_path / "own.conf").write_text("ours\n")
    (tmp_path / "new.conf").write_text("ours\n")
    (tmp_path / "made").mkdir()
    tuned = args | {"masked": [{"unit": "tuned.service", "active": "inactive", "enabled": "masked"}]}
    rc, output = record(tmp_path, tuned)
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert json.loads(state.read_text()) == first


def test_a_later_call_adds_only_what_is_not_recorded_yet(tmp_path):
    args = host(tmp_path)
    rc, output = record(tmp_path, {"path": args["path"], "files": args["files"][:1]})
    assert rc == 0, output[-3000:]
    rc, output = record(tmp_path, {"path": args["path"], "masked": args["masked"], "files": args["files"]})
    assert rc == 0 and "changed=1" in output, output[-3000:]
    state = json.loads(Path(args["path"]).read_text())
    assert set(state["files"]) == set(args["files"]) and set(state["masked"]) == {"tuned.service"}


def test_an_unreadable_record_fails_before_anything_is_written(tmp_path):
    args = host(tmp_path)
    Path(args["path"]).parent.mkdir()
    Path(args["path"]).write_text("{not json")
    rc, output = record(tmp_path, args)
    assert rc != 0
    assert "host-tuning.json cannot be read as JSON" in output, output[-3000:]
    assert "nothing was changed" in output
    assert Path(args["path"]).read_text() == "{not json"


def main_steps(tmp: Path) -> list:
    """tasks/main.yml's steps before persist.yml, as written: its includes run as the role's task files."""
    steps = [
        {"ansible.builtin.include_vars": str(ROLE / "defaults" / "main.yml")},
        {"ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")},
    ]
    for step in present_steps():
        name = step.get("ansible.builtin.include_tasks")
        if name:
            include = {"name": "kt_host_tuning", "tasks_from": name[:-4]}
            when = {"when": step["when"]} if "when" in step else {}
            steps.append({"ansible.builtin.include_role": include} | when)
        elif "ansible.builtin.import_tasks" not in step:
            steps.append(step)
    return steps


def tune(tmp: Path) -> tuple[int, str]:
    """The role's steps up to its runtime settings, a governor asked for with tuned running (stop), every path
    in tmp: sysctls, cpufreq, limits.d, sysctl.d, the report and the record beside it."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "systemctl").write_text(SYSTEMCTL.format(log=tmp / "systemctl.log", units=tmp / "units"))
    (bin_dir / "systemctl").chmod(0o755)
    for folder in ("limits.d", "sysctl.d"):
        (tmp / folder).mkdir(exist_ok=True)
    extra = {
        "role_path": str(ROLE), "kt_preflight_facts": {"container": False},
        "kt_host_tuning_sysctls": {"vm.swappiness": 10}, "kt_host_tuning_thp": "",
        "kt_host_tuning_shm_size": "",
        "kt_host_tuning_cpu_governor": "performance", "kt_host_tuning_governor_daemons": "stop",
        "kt_host_tuning_governors_file": str(tmp / "cpu" / "cpu0" / "cpufreq" / GOVERNORS),
        "kt_host_tuning_report_file": str(tmp / "state" / "tuning.json"),
        "kt_host_tuning_limits_dir": str(tmp / "limits.d"),
        "kt_host_tuning_sysctl_dir": str(tmp / "sysctl.d"),
        "kt_host_tuning__sysctl_boot_dirs": [str(tmp / "sysctl.d")],
        "kt_host_tuning__sysctl_conf": str(tmp / "sysctl.conf"),
        "kt_host_tuning__sysctl_root": str(tmp / "sys"), "kt_host_tuning__cpu_root": str(tmp / "cpu"),
        **config_paths(tmp),
    }  # fmt: skip
    env = LIBRARY | {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "KT_TUNE_SYSCTL_ROOT": str(tmp / "sys"),
        "KT_TUNE_CPU_ROOT": str(tmp / "cpu"),
    }
    return run_play(tmp, main_steps(tmp), extra, env=env)


def test_the_role_records_the_host_before_it_tunes_it_and_a_rerun_keeps_that(tmp_path):
    host(tmp_path)
    (tmp_path / "cpu" / "cpu0" / "cpufreq" / GOVERNORS).write_text("performance powersave\n")
    (tmp_path / "units").mkdir()
    (tmp_path / "units" / "tuned.service").write_text(RUNNING)
    rc, output = tune(tmp_path)
    assert rc == 0, output[-4000:]
    assert (tmp_path / "sys" / "vm" / "swappiness").read_text() == "10\n"  # tuned
    assert (tmp_path / "cpu" / "cpu0" / "cpufreq" / "scaling_governor").read_text() == "performance\n"
    state = tmp_path / "state" / "host-tuning.json"
    first = json.loads(state.read_text())
    assert first["runtime"][str(tmp_path / "sys" / "vm" / "swappiness")]["value"] == "60"
    cpu1 = str(tmp_path / "cpu" / "cpu1" / "cpufreq" / "scaling_governor")
    assert first["runtime"][cpu1]["value"] == "powersave"
    link = (tmp_path / "unit-links" / "tuned.service").lstat()  # the stand-in systemctl's mask link
    made = {"path": str(tmp_path / "unit-links" / "tuned.service"), "dev": link.st_dev, "ino": link.st_ino,
            "mtime_ns": link.st_mtime_ns}  # fmt: skip
    assert first["masked"] == {"tuned.service": {"active": "active", "enabled": "enabled", "mask": made}}
    assert first["files"][str(tmp_path / "limits.d" / "90-ktinfra.conf")] is None
    assert first["files"][str(tmp_path / "state" / "tuning.json")] is None
    assert first["dirs"][str(tmp_path / "state")] is False  # made for the record and the report

    masked = RUNNING.replace("=enabled", "=masked").replace("=active", "=")
    (tmp_path / "units" / "tuned.service").write_text(masked)
    rc, output = tune(tmp_path)
    assert rc == 0 and "changed=0" in output, output[-4000:]
    assert json.loads(state.read_text()) == first
