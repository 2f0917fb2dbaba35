"""kt_host_tuning in a play with gather_facts: false.

The role reads ansible_facts' distribution (its OS vars, tasks/main.yml) and service_mgr (persist.yml), and a
play that gathers no facts failed at "Load OS specific variables" with "object of type 'dict' has no attribute
'distribution'". It now gathers the minimal subset where those are missing. The play runs main.yml's tasks up
to its OS vars (validate.yml reads only) with gather_facts: false, as every run_play play does; nothing is
written outside tmp_path.
"""

from __future__ import annotations

import yaml
from role_play import ROLES, run_play

ROLE = ROLES / "kt_host_tuning"


def present_steps() -> list:
    """tasks/main.yml's steps of kt_host_tuning_state=present (its block), in their order."""
    main = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    return next(step["block"] for step in main if "block" in step)


SHOWN = "{{ kt_host_tuning_limits_dir }} {{ ansible_facts['service_mgr'] }}"  # OS vars and a gathered fact


def test_the_role_gets_its_os_vars_without_gathered_facts(tmp_path):
    main = present_steps()
    last = next(i for i, t in enumerate(main) if t.get("name") == "Load OS specific variables")
    tasks = [
        {"ansible.builtin.include_vars": str(ROLE / "defaults" / "main.yml")},
        {"ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")},
        *[{**t, "ansible.builtin.include_tasks": str(ROLE / "tasks" / t["ansible.builtin.include_tasks"])}
          if "ansible.builtin.include_tasks" in t else t for t in main[: last + 1]],
        {"ansible.builtin.copy": {"dest": str(tmp_path / "out"), "mode": "0644", "content": SHOWN}},
    ]  # fmt: skip
    extra = {"role_path": str(ROLE), "kt_host_tuning_shm_size": "", "kt_host_tuning_cpu_governor": "",
             "kt_host_tuning_report_file": str(tmp_path / "tuning.json")}  # fmt: skip
    rc, output = run_play(tmp_path, tasks, extra)
    assert rc == 0, output[-3000:]
    limits_dir, service_mgr = (tmp_path / "out").read_text().split()
    assert limits_dir.startswith("/") and service_mgr
