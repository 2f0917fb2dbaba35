"""kt_common's tasks/venv.yml, the one copy of "make a venv, or make again one a cut-off create left", run for
real on localhost through kt_serve's supervisord venv and kt_router's venv (their own task files: the whole
roles need supervisord or systemd); and no role outside kt_common makes a venv by hand."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from role_play import ROLES, interrupt_play, run_play, task_output
from test_kt_router_role import fake_systemctl

REPAIR = "Create again the venv that a cut-off run left without pip"


def _tagged(role: str, tasks_from: str, tag: str) -> list:
    """The role's task file in a block tagged as its playbook tags it (serve.yml serve, router.yml router)."""
    include = {"ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from}}
    return [{"name": f"{role} under --tags {tag}", "block": [include], "tags": [tag]}]


def _six(venv: Path) -> str:
    python = venv / "bin" / "python"
    return subprocess.check_output([python, "-c", "import six; print(six.__version__)"], text=True).strip()


def _cut_off(venv: Path) -> None:
    """What `python -m venv` leaves when it is cut off before ensurepip finished: bin/python and pyvenv.cfg,
    no pip, no bin/activate (venv writes the activate scripts after pip)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    for script in (venv / "bin").glob("activate*"):
        script.unlink()
    assert (venv / "bin" / "python").exists() and (venv / "pyvenv.cfg").exists()


# slow: a cut-off run; the same repair in tasks/venv.yml (a venv without pip made again, then nothing to do)
# as test_a_supervisord_venv_cut_off_by_ctrl_c_is_created_again, a cheaper run
@pytest.mark.slow
def test_a_router_venv_cut_off_while_it_was_created_is_created_again(tmp_path):
    """Before: `creates: bin/python` kept the cut-off venv, and every re-run failed installing sglang-router
    (the pip module found no bin/activate and looked for `virtualenv` to make the venv). The install into the
    venv made again restarts the router (systemctl: test_kt_router_role's stand-in)."""
    venv = tmp_path / "router"
    extra = {"kt_router_venv": str(venv), "kt_router_packages": ["six==1.16.0"]}  # from the local index
    tasks = _tagged("kt_router", "venv", "router")
    systemd = fake_systemctl(tmp_path)
    _cut_off(venv)
    rc, output = run_play(tmp_path, tasks, extra, env=systemd, flags=["--check", "--tags", "router"])
    assert rc == 0 and "changed:" in task_output(output, REPAIR), output[-3000:]  # predicted, not made
    assert not (venv / "bin" / "pip").exists()
    rc, output = run_play(tmp_path, tasks, extra, env=systemd, flags=["--tags", "router"])
    assert rc == 0 and "changed:" in task_output(output, REPAIR), output[-3000:]
    assert _six(venv) == "1.16.0"
    assert "restart ktinfra-router.service" in (tmp_path / "systemctl.log").read_text().splitlines()
    rc, output = run_play(tmp_path, tasks, extra, env=systemd, flags=["--tags", "router"])
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert "skipping:" in task_output(output, REPAIR)


def test_a_supervisord_venv_cut_off_by_ctrl_c_is_created_again(tmp_path):
    """Ctrl-C while kt_serve made supervisord's venv (systemd not PID 1). Before: every re-run failed in
    "Install supervisor" for ever."""
    venv = tmp_path / "supervisor"
    extra = {"kt_serve_supervisor_venv": str(venv), "kt_serve_supervisor_packages": ["six==1.16.0"]}
    tasks = _tagged("kt_serve", "supervisor_venv", "serve")
    rc, output = interrupt_play(tmp_path, tasks, extra, venv / "bin" / "python")
    assert rc != 0 and (venv / "bin" / "python").exists(), output[-3000:]
    assert not (venv / "bin" / "pip").exists(), output[-3000:]
    rc, output = run_play(tmp_path, tasks, extra, flags=["--tags", "serve"])
    assert rc == 0 and "changed:" in task_output(output, REPAIR), output[-3000:]
    assert _six(venv) == "1.16.0"
    rc, output = run_play(tmp_path, tasks, extra, flags=["--tags", "serve"])
    assert rc == 0 and "changed=0" in output, output[-3000:]


COMMON_VENV = {"name": "kt_common", "tasks_from": "venv"}


def test_a_whole_venv_is_kept_with_a_broken_pip_conf_and_other_tags_skip_it(tmp_path):
    """The probe reads pip's RECORD with python -I, no pip configuration: a broken pip.conf (which fails
    `pip --version`) must not make a whole venv look cut off, and --clear it."""
    venv = tmp_path / "router"
    extra = {"kt_router_venv": str(venv), "kt_router_packages": ["six==1.16.0"]}
    tasks = _tagged("kt_router", "venv", "router")
    rc, output = run_play(tmp_path, tasks, extra, env=fake_systemctl(tmp_path))  # the install restarts it
    assert rc == 0 and "changed:" in task_output(output, "Create the venv router"), output[-3000:]
    marker = venv / "kept"
    marker.write_text("")
    (tmp_path / "bad-pip.conf").write_text("[global\n")
    broken = {"PIP_CONFIG_FILE": str(tmp_path / "bad-pip.conf")}
    inputs = {"kt_common_venv_dir": str(venv), "kt_common_venv_name": "router"}
    venv_only = [{"ansible.builtin.include_role": COMMON_VENV, "vars": inputs}]
    rc, output = run_play(tmp_path, venv_only, env=broken)
    assert rc == 0 and "changed=0" in output and marker.exists(), output[-3000:]
    assert "skipping:" in task_output(output, REPAIR)
    rc, output = run_play(tmp_path, tasks, extra, flags=["--tags", "serve"])  # not this playbook's tag
    assert rc == 0 and task_output(output, "Look for a working venv") == "", output[-3000:]


def test_the_venv_inputs_are_checked(tmp_path):
    tasks = [{"ansible.builtin.include_role": {"name": "kt_common", "tasks_from": "venv"},
              "vars": {"kt_common_venv_name": "nameless"}}]  # fmt: skip
    rc, output = run_play(tmp_path, tasks)
    assert rc != 0 and "kt_common_venv_dir" in output, output[-3000:]
    assert "Look for a working venv" not in output


CALLERS = {
    "kt_model_store/tasks/fetch.yml",
    "kt_preflight/tasks/tool.yml",
    "kt_python_env/tasks/env.yml",
    "kt_python_env/tasks/uv.yml",
    "kt_router/tasks/venv.yml",
    "kt_serve/tasks/supervisor_venv.yml",
}


SOURCES = {".yml", ".yaml", ".j2", ".sh", ".py"}


def _role_files():
    for path in sorted(ROLES.rglob("*")):
        rel = path.relative_to(ROLES)
        if path.is_file() and path.suffix in SOURCES and rel.parts[0] != "kt_common":
            if not any(part.startswith(".") or part == "molecule" for part in rel.parts):
                yield rel, path


def _tasks(tasks: list) -> list:
    """The tasks of a task file, those inside block/rescue/always included (kt_python_env's env.yml runs its
    conda env and venv steps in a block since 2d7842a)."""
    found = []
    for task in tasks:
        found.append(task)
        for key in ("block", "rescue", "always"):
            found += _tasks(task.get(key) or [])
    return found


def test_no_role_outside_kt_common_makes_or_repairs_a_venv_by_hand():
    """One copy of the block (before: four copies, and two venvs still kept a cut-off create for ever)."""
    by_hand = re.compile(r"-m[\s,\"']+venv\b|\bvenv\b.*--clear|read_text\(\s*['\"]RECORD|virtualenv_command")
    hand = [
        f"roles/{rel}:{n}"
        for rel, path in _role_files()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith("#") and by_hand.search(line.split(" # ", 1)[0])
    ]
    assert hand == []
    assert "--clear" in (ROLES / "kt_common" / "tasks" / "venv.yml").read_text()
    callers = set()
    for rel, path in _role_files():
        if path.suffix != ".yml" or rel.parts[1] != "tasks":
            continue
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            include = task.get("ansible.builtin.include_role", task.get("ansible.builtin.import_role", {}))
            if include.get("name") == "kt_common" and include.get("tasks_from") == "venv":
                callers.add(str(rel))
                assert set(task["vars"]) >= {"kt_common_venv_dir", "kt_common_venv_python"}, rel
    assert callers == CALLERS


def test_the_env_records_are_those_kt_python_env_writes():
    # kt_common's env_finished reads what kt_python_env writes next to each env
    written = yaml.safe_load((ROLES / "kt_python_env/vars/main.yml").read_text())["kt_python_env_state_files"]
    read = yaml.safe_load((ROLES / "kt_common/vars/main.yml").read_text())["kt_common__env_records"]
    assert read == [written["requirements"], written["installed"], written["freeze"]]
