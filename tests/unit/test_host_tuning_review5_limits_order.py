"""kt_host_tuning: a limits.d file read after 90-ktinfra.conf that sets memlock or nofile to another value.

pam_limits reads limits.d in file-name order and for one domain the last entry wins (shown in a Debian 12
container with su and pam_limits: ours `* hard nofile 8192`, a 95-vendor.conf `* hard nofile 4096`, the login
got 4096; a 10-early.conf got ours). Before, the role wrote its file and reported nothing: every login kept
the vendor's limit. Now the play stops before any change, naming the file and line. The play is
tasks/main.yml's steps in order (its include_vars left to the extra vars, persist.yml's limits.d template
writing into tmp_path), with the role's library for its inline module tasks.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from role_play import ROLES, run_play

ROLE = ROLES / "kt_host_tuning"


def present_steps() -> list:
    """tasks/main.yml's steps of kt_host_tuning_state=present (its block), in their order."""
    main = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    return next(step["block"] for step in main if "block" in step)


def main_yml_play(tmp: Path) -> tuple[list, Path]:
    limits_dir = tmp / "limits.d"
    limits_dir.mkdir()
    dropin = limits_dir / "90-ktinfra.conf"
    template = {"src": str(ROLE / "templates" / "limits.conf.j2"), "dest": str(dropin), "mode": "0644"}
    tasks = []
    for step in present_steps():
        name = step.get("ansible.builtin.include_tasks") or step.get("ansible.builtin.import_tasks")
        if name == "persist.yml":
            tasks.append({"name": "limits.d as persist.yml writes it", "ansible.builtin.template": template})
        elif name:
            # public: the role's vars, which the next includes' conditions read
            include = {"name": "kt_host_tuning", "tasks_from": name[:-4], "public": True}
            tasks.append(
                {"ansible.builtin.include_role": include} | ({"when": step["when"]} if "when" in step else {})
            )
        elif "ansible.builtin.include_vars" not in step and "kt_tuning_record" not in step:
            tasks.append(step)  # the record (test_kt_host_tuning_record.py) needs the role's vars
    return tasks, dropin


def play(tmp: Path, files: dict[str, str]) -> tuple[int, str, Path]:
    tasks, dropin = main_yml_play(tmp)
    for name, text in files.items():
        (dropin.parent / name).write_text(text)
    extra = {
        "kt_host_tuning_limits_dir": str(dropin.parent),
        "kt_host_tuning_memlock": "unlimited",
        "kt_host_tuning_nofile": 65536,
        "kt_host_tuning_sysctls": {},
        "kt_host_tuning_report_file": str(tmp / "tuning.json"),
        "kt_host_tuning_state_file": str(tmp / "host-tuning.json"),
    }
    extra |= dict.fromkeys(
        ["kt_host_tuning_thp", "kt_host_tuning_cpu_governor", "kt_host_tuning_shm_size"], ""
    )
    rc, output = run_play(tmp, tasks, extra, env={"ANSIBLE_LIBRARY": str(ROLE / "library")})
    return rc, output, dropin


def test_a_later_file_with_other_limits_stops_the_play_before_any_change(tmp_path):
    vendor = "# vendor tuning\n*    soft nofile  4096\n*    hard nofile  4096   # keep low\n"
    rc, output, dropin = play(tmp_path, {"95-vendor.conf": vendor, "99-root.conf": "root - memlock 64\n"})
    assert rc != 0, output[-3000:]
    folder = dropin.parent
    assert f"{folder}/95-vendor.conf line 2 sets * soft nofile 4096; " in output, output[-3000:]
    assert f"{folder}/95-vendor.conf line 3 sets * hard nofile 4096" in output
    assert f"{folder}/99-root.conf line 1 sets root soft memlock 64" in output
    assert f"read after {dropin} by pam_limits (the last entry wins)" in output
    assert not dropin.exists() and not (tmp_path / "tuning.json").exists()


def test_earlier_files_same_values_and_other_users_entries_pass(tmp_path):
    files = {
        "10-early.conf": "*    hard nofile  4096\n",  # read before ours: ours wins
        "95-same.conf": "*  -  nofile  65536\nroot hard memlock infinity\n",  # the same values
        "96-user.conf": "alice hard nofile 1024\n@gpu - memlock 64\n",  # an admin's choice for them
        "97-notes.txt": "* hard nofile 1\n",  # not a .conf: pam_limits does not read it
    }
    rc, output, dropin = play(tmp_path, files)
    assert rc == 0, output[-3000:]
    assert "*    hard nofile  65536\n" in dropin.read_text()
