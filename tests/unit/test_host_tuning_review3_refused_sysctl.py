"""kt_host_tuning: a sysctl value the kernel refuses (EINVAL) must not reach /etc/sysctl.d.

The kernel's refusal is real: KT_TUNE_SYSCTL_ROOT holds a link to /proc/self/oom_score_adj, which the kernel
refuses above 1000 with EINVAL, as it refuses vm.swappiness 300 (self is the writing process, so nothing else
changes). Before, the role persisted first: the value went into sysctl.d (systemd-sysctl.service then fails at
every boot) and the play passed with it reported not_set, as "I/O error" (dash's printf hides the errno).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml
from role_play import ROLES, run_play

ROLE = ROLES / "kt_host_tuning"


def present_steps() -> list:
    """tasks/main.yml's steps of kt_host_tuning_state=present (its block), in their order."""
    main = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    return next(step["block"] for step in main if "block" in step)


REFUSED = "ktinfra_test.oom_score_adj"


def sysctl_root(tmp: Path) -> Path:
    root = tmp / "sys"
    (root / "ktinfra_test").mkdir(parents=True)
    (root / "ktinfra_test" / "oom_score_adj").symlink_to("/proc/self/oom_score_adj")
    (root / "ktinfra_test" / "swappiness").write_text("60\n")
    return root


def test_kt_tune_names_the_kernels_errno(tmp_path):
    env = dict(os.environ, KT_TUNE_SYSCTL_ROOT=str(sysctl_root(tmp_path)))
    out = subprocess.run(["sh", str(ROLE / "files" / "kt-tune.sh"), "sysctl", REFUSED, "5000"],
                         capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    report = json.loads(out)
    assert report["status"] == "not_set" and report["reason"].endswith(": Invalid argument"), report


def main_yml_play(tmp: Path) -> tuple[list, Path]:
    """tasks/main.yml's steps in its order: the role's own task files with their conditions (ansible's
    include_role, so kt-tune.sh is the role's; public, for the role's vars those conditions read), and of
    persist.yml its sysctl.d task, writing into tmp."""
    dropin = tmp / "90-ktinfra.conf"
    persist = yaml.safe_load((ROLE / "tasks" / "persist.yml").read_text())
    sysctl_task = next(t for t in persist if t["name"] == "Persist sysctls")
    sysctl_task["ansible.builtin.template"] |= {
        "src": str(ROLE / "templates" / "sysctl.conf.j2"),
        "dest": str(dropin),
    }
    tasks = []
    for step in present_steps():
        name = step.get("ansible.builtin.include_tasks") or step.get("ansible.builtin.import_tasks")
        if name == "persist.yml":
            tasks.append(sysctl_task)
        elif name:
            include = {"name": "kt_host_tuning", "tasks_from": name[:-4], "public": True}
            tasks.append(
                {"ansible.builtin.include_role": include} | ({"when": step["when"]} if "when" in step else {})
            )
    assert len(tasks) == 5, tasks  # validate, boot_order, governor_daemons, runtime, persist
    return tasks, dropin


def play(tmp: Path, sysctls: dict) -> tuple[int, str, Path]:
    tasks, dropin = main_yml_play(tmp)
    extra = {"kt_host_tuning_sysctls": sysctls, "kt_host_tuning_report_file": str(tmp / "tuning.json")}
    extra |= dict.fromkeys(
        ["kt_host_tuning_thp", "kt_host_tuning_cpu_governor", "kt_host_tuning_shm_size"], ""
    )
    # tasks/boot_order.yml reads these instead of this host's /etc/sysctl.d (none of them exists)
    extra |= {
        "kt_host_tuning_sysctl_dir": str(tmp),
        "kt_host_tuning__sysctl_boot_dirs": [str(tmp / "sysctl.d")],
        "kt_host_tuning__sysctl_conf": str(tmp / "sysctl.conf"),
    }
    rc, output = run_play(tmp, tasks, extra, env={"KT_TUNE_SYSCTL_ROOT": str(sysctl_root(tmp))})
    return rc, output, dropin


def test_a_value_the_kernel_refuses_fails_the_play_before_sysctl_d_holds_it(tmp_path):
    value = 5000
    rc, output, dropin = play(tmp_path, {"ktinfra_test.swappiness": 10, REFUSED: value})
    assert rc != 0, output[-3000:]
    assert f"the kernel refused {REFUSED}={value} (cannot write " in output, output[-3000:]
    assert "oom_score_adj: Invalid argument): not written to sysctl.d" in output
    assert not dropin.exists(), dropin.read_text()
    report = {s["setting"]: s for s in json.loads((tmp_path / "tuning.json").read_text())["settings"]}
    assert report[REFUSED]["status"] == "not_set" and report["ktinfra_test.swappiness"]["status"] == "applied"


def test_values_the_kernel_takes_are_applied_and_persisted(tmp_path):
    rc, output, dropin = play(tmp_path, {"ktinfra_test.swappiness": 10})
    assert rc == 0, output[-3000:]
    assert (tmp_path / "sys" / "ktinfra_test" / "swappiness").read_text() == "10\n"
    assert "\nktinfra_test.swappiness = 10\n" in dropin.read_text()
