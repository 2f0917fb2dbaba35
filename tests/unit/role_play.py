"""Run a play with real ansible-playbook on localhost (-c local), with this checkout's roles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "molecule" / "_shared"))  # ctrl_c, shared with the molecule verify tests
from ansible_run import task_output  # noqa: E402,F401  (the unit tests import it from here)
from ctrl_c import ctrl_c_until_exit, kill_what_runs_under, start_in_own_group  # noqa: E402

ROLES = REPO / "roles"
# What kt_preflight leaves on a host for the roles after it (kt_serve, kt_train and kt_model_store refuse to
# run without it: kt_common's tasks/preflight_ran.yml): ktinfra's path, no plan requested, the stack it
# planned with, no env resolved.
# The tests that include those roles whole name their own ktinfra and interpreters.
PREFLIGHT = {
    "kt_preflight_ktinfra_exe": "/opt/ktinfra/tool/bin/ktinfra",
    "kt_preflight_plans": [],
    "kt_preflight_stack_arg": "kt-0.7",
    "kt_python_env_install": {"envs": [], "upstream": {"ref": "v0.7.0"}},
}


def run_play(
    tmp: Path,
    tasks: list,
    extra: dict | None = None,
    cli: list[str] | None = None,
    inventory: str = "localhost,",
    env: dict | None = None,
    flags: list[str] | None = None,
) -> tuple[int, str]:
    """Run `tasks` on localhost; `extra` goes in as typed JSON, `cli` as raw -e key=value strings, `flags`
    as ansible-playbook options (--check)."""
    command, run_env = _playbook(tmp, tasks, extra, cli, inventory, env, flags)
    proc = subprocess.run(command, capture_output=True, text=True, env=run_env, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def interrupt_play(tmp: Path, tasks: list, extra: dict, when_exists: Path) -> tuple[int, str]:
    """Run `tasks` as run_play does and press Ctrl-C (ctrl_c.ctrl_c_until_exit) as soon as `when_exists`
    appears."""
    command, run_env = _playbook(tmp, tasks, extra, None, "localhost,", None, None)
    log = tmp / "interrupted.log"
    with log.open("w") as out:
        proc = start_in_own_group(command, run_env, out)
        deadline = time.monotonic() + 300
        while not os.path.lexists(when_exists) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        ctrl_c_until_exit(proc, seconds=60)
    kill_what_runs_under(tmp)  # the next play meets what the cut-off one left, not a race with it
    return proc.returncode, log.read_text()


def logging_ktinfra(path: Path) -> Path:
    """A ktinfra at `path` that runs this checkout and logs each call's arguments to <path>.log and the last
    plan it printed to <path>.plan.json."""
    path.parent.mkdir(parents=True, exist_ok=True)
    log, plan = path.with_name(path.name + ".log"), path.with_name(path.name + ".plan.json")
    path.write_text(
        f'#!/bin/bash\necho "$*" >> {log}\n'
        f'[ "$1" = plan ] || PYTHONPATH={REPO} exec {sys.executable} -m ktinfra "$@"\n'
        f'PYTHONPATH={REPO} {sys.executable} -m ktinfra "$@" > {plan}\nrc=$?\ncat {plan}\nexit $rc\n'
    )
    path.chmod(0o755)
    return path


def changed_site_profile(tmp: Path, profile: dict) -> tuple[Path, Path, Path]:
    """A logging_ktinfra in tmp/kt/bin, `profile` installed next to it (tmp/kt/profiles/site.yaml) and the
    controller's file tmp/site.yaml changed since (named site-next): (ktinfra, installed, controller)."""
    ktinfra = logging_ktinfra(tmp / "kt" / "bin" / "ktinfra")
    installed = tmp / "kt" / "profiles" / "site.yaml"
    installed.parent.mkdir()
    installed.write_text(yaml.safe_dump(profile))
    controller = tmp / "site.yaml"
    controller.write_text(yaml.safe_dump(profile | {"name": "site-next"}))
    return ktinfra, installed, controller


def stacks_planned(ktinfra: Path) -> list[str]:
    """The --stack of each `plan` the logging_ktinfra at `ktinfra` ran, in order ("" for none)."""
    calls = ktinfra.with_name(ktinfra.name + ".log").read_text().splitlines()
    words = [call.split() for call in calls if call.startswith("plan ")]
    return [w[w.index("--stack") + 1] if "--stack" in w else "" for w in words]


def _playbook(tmp, tasks, extra, cli, inventory, env, flags) -> tuple[list[str], dict]:
    play = tmp / "play.yml"
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    (tmp / "vars.json").write_text(json.dumps({"ansible_python_interpreter": sys.executable} | (extra or {})))
    run_env = dict(os.environ, ANSIBLE_ROLES_PATH=str(ROLES), ANSIBLE_LOCALHOST_WARNING="false") | (env or {})
    if "TMPDIR" not in (env or {}):
        # the roles write and remove files in TMPDIR (kt_preflight removes the user's old ktinfra-pip.*.sh
        # there): never this machine's /tmp. Beside tmp, not in it: tests compare tmp's files before/after.
        scratch = tmp.parent / f"{tmp.name}.tmpdir"
        scratch.mkdir(exist_ok=True)
        run_env["TMPDIR"] = str(scratch)
    run_env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    command = [playbook, "-i", inventory, "-c", "local", str(play), "-e", f"@{tmp / 'vars.json'}"]
    for item in cli or []:
        command += ["-e", item]
    command += flags or []
    return command, run_env
