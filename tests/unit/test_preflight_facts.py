"""kt_preflight runs under every tag whose roles read its facts, and those roles refuse to run without them.

Before: kt_preflight's play (playbooks/provision.yml) was tagged preflight, envs and tuning only, so
`--tags store,serve` (docs/readme/roles2.md), `--tags serve` or `--tags train` ran kt_model_store, kt_serve
and kt_train without kt_preflight_ktinfra_exe, kt_preflight_plans and kt_python_env_install: their defaults
fell back to /opt/ktinfra/tool/bin/ktinfra, kt_python_env_root/kt-kernel (not a conda host's
<conda>/envs/kt-kernel), converter tag v0.7.0 and converter threads 0, and a running instance was restarted
onto a missing interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from role_play import PREFLIGHT, REPO, run_play
from test_kt_model_store_role import role_vars
from test_kt_serve_role import instance
from test_kt_train_role import run, setup

INVENTORY = REPO / "inventories" / "example" / "hosts"
PREFLIGHT_TASK = "kt_preflight : Look for the installed ktinfra"


def _playbook(playbook: str, inventory: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """ansible-playbook of this checkout's playbooks/PLAYBOOK with its roles."""
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_NOCOLOR="1")
    command = [str(Path(sys.executable).parent / "ansible-playbook"), str(REPO / "playbooks" / playbook)]
    command += ["-i", str(inventory), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def _listed(playbook: str, tags: str) -> str:
    proc = _playbook(playbook, INVENTORY, "--list-tasks", "--tags", tags, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize("playbook", ["serve.yml", "train.yml", "site.yml"])
@pytest.mark.parametrize(
    "tags", ["store", "serve", "train", "store,serve", "provision", "preflight", "envs", "tuning"]
)
def test_a_tagged_run_runs_preflight_first(playbook, tags):
    lines = _listed(playbook, tags).splitlines()
    preflight = [i for i, line in enumerate(lines) if PREFLIGHT_TASK in line]
    assert preflight, "\n".join(lines)
    # before any task of the roles that read its facts
    for role in ("kt_model_store", "kt_serve", "kt_train"):
        uses = [
            i for i, line in enumerate(lines) if f"{role} : " in line and "Validating arguments" not in line
        ]
        assert not uses or preflight[0] < uses[0], (role, "\n".join(lines))


def test_the_router_run_contacts_the_router_hosts_alone():
    """Before: a first play gathered facts on every kt_serve host, of which workers.json reads none (its
    addresses are inventory variables): one serving host down failed the router's run (exit 4)."""
    proc = _playbook("router.yml", INVENTORY, "--list-hosts", cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hosts = {line.strip() for line in proc.stdout.splitlines() if line.startswith("      ")}
    assert hosts == {"gateway"}, proc.stdout


def test_the_router_needs_no_preflight():
    """router.yml reads no fact of kt_preflight: --tags router does not install and check on every host.
    The preflight role is tagged always (--skip-tags must not skip it), so --list-tasks shows it;
    provision.yml's pre-task ends its hosts first, which test_playbooks_review_tags checks with a real run."""
    assert PREFLIGHT_TASK not in _listed("router.yml", "router")
    listed = _listed("site.yml", "router")
    skip = "Skip the hosts of a playbook whose roles this run's --tags do not select"
    assert listed.count(skip) == 2, listed
    assert "kt_router : " in _listed("site.yml", "router")


def _serve_vars(tmp: Path) -> dict:
    for sub in ("model", "weights"):
        (tmp / sub).mkdir(exist_ok=True)
    return PREFLIGHT | {
        "kt_serve_config_dir": str(tmp / "cfg"),
        "kt_serve_render_dir": str(tmp / "render"),
        "kt_serve_unit_dir": str(tmp / "units"),
        "kt_serve_store_state_file": str(tmp / "no-store.json"),
        "kt_serve_supervisor_dir": str(tmp / "supervisor"),
        "kt_serve_instances": [instance(tmp, "a", 30001)],
    }


def _store_vars(tmp: Path) -> dict:
    (tmp / "src").mkdir(exist_ok=True)
    return role_vars(tmp, [{"name": "m", "source": "local", "repo": str(tmp / "src")}])


def _train_vars(tmp: Path) -> dict:
    return setup(tmp) | {"kt_train_runs": [run()]}


ROLES = {"kt_serve": _serve_vars, "kt_model_store": _store_vars, "kt_train": _train_vars}


def _files(tmp: Path) -> dict[str, float | None]:
    """Every path under tmp with a file's mtime (ansible's own temp dirs come and go in TMPDIR), but the play
    and vars files run_play writes."""
    skip = {tmp / "play.yml", tmp / "vars.json"}
    return {str(p): None if p.is_dir() else p.lstat().st_mtime for p in tmp.rglob("*") if p not in skip}


# the combinations left in make test: each role and each fact once
IN_CI = {
    ("kt_preflight_ktinfra_exe", "kt_model_store"),
    ("kt_preflight_plans", "kt_serve"),
    ("kt_preflight_stack_arg", "kt_train"),
    ("kt_python_env_install", "kt_model_store"),
}


# slow: the other combinations meet the one check the three roles include first (kt_common's
# tasks/preflight_ran.yml) as those of IN_CI, e.g. [kt_preflight_plans-kt_serve]
@pytest.mark.parametrize(
    ("missing", "role"),
    [
        pytest.param(
            missing, role, id=f"{missing}-{role}", marks=() if (missing, role) in IN_CI else pytest.mark.slow
        )
        for missing in sorted(PREFLIGHT)
        for role in sorted(ROLES)
    ],
)
def test_a_role_without_preflights_facts_refuses_before_any_change(tmp_path, role, missing):
    extra = {k: v for k, v in ROLES[role](tmp_path).items() if k != missing}
    (tmp_path / "scratch").mkdir(exist_ok=True)
    before = _files(tmp_path)
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "TMPDIR": str(tmp_path / "scratch")}
    env["KT_TEST_SYSTEMCTL_LOG"] = str(tmp_path / "systemctl.log")
    rc, output = run_play(tmp_path, [{"ansible.builtin.include_role": {"name": role}}], extra, env=env)
    assert rc != 0, output[-3000:]
    message = f"{role} needs the facts kt_preflight sets on this host, missing here: {missing}."
    assert message in " ".join(output.split()), output[-3000:]
    assert _files(tmp_path) == before  # no file written, no scratch dir, no systemctl call logged


def test_env_checks_off_need_no_install_plan(tmp_path):
    """kt_preflight_check_envs false: preflight resolves no env (kt_python_env_install), the roles take
    kt_python_env_root/<env> as before; the other facts are still needed."""
    extra = {k: v for k, v in _store_vars(tmp_path).items() if k != "kt_python_env_install"}
    extra |= {"kt_preflight_check_envs": False, "kt_model_store_models": []}
    rc, output = run_play(tmp_path, [{"ansible.builtin.include_role": {"name": "kt_model_store"}}], extra)
    assert rc == 0, output[-3000:]
    assert (tmp_path / "store.json").exists()


def _site_check(tmp: Path, tags: str, groups: tuple[str, ...] = ("kt_train",)) -> tuple[int, str]:
    """site.yml --check --tags TAGS with this host in `groups`; a --check preflight on a host without ktinfra
    stops at once, before changing anything."""
    host = f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}"
    inventory = tmp / "hosts"
    inventory.write_text(
        "".join(f"[{g}]\n{host if g in groups else ''}\n" for g in ("kt_serve", "kt_train", "kt_router"))
    )
    tool_dir = f"kt_preflight_tool_dir={tmp / 'tool'}"
    proc = _playbook("site.yml", inventory, "--check", "--tags", tags, "-e", tool_dir, cwd=tmp)
    return proc.returncode, proc.stdout + proc.stderr


STOPPED_AT_PREFLIGHT = "--check cannot go further on this host"


def test_a_serve_run_of_site_yml_leaves_train_only_hosts_alone(tmp_path):
    """Before: site.yml --tags serve reached train.yml's provision import too, whose preflight (tagged serve
    for serve.yml's sake) installed, checked and planned training on hosts that serve nothing."""
    rc, output = _site_check(tmp_path, "serve")
    assert rc == 0 and "TASK [kt_preflight" not in output, output[-3000:]
    rc, output = _site_check(tmp_path, "train")  # the same host in a run that trains: preflight first
    assert rc != 0 and STOPPED_AT_PREFLIGHT in " ".join(output.split()), output[-3000:]


# slow: [serve] selects serve.yml's import first, as [store] does (the same provision pre-tasks and stop)
@pytest.mark.parametrize("tags", [pytest.param("serve", marks=pytest.mark.slow), "train", "store"])
def test_a_host_that_serves_and_trains_gets_preflight_under_either_tag(tmp_path, tags):
    """serve.yml's import skips the host under --tags train; it must not count as provisioned then, or
    train.yml's import skipped it too and kt_train refused for want of preflight's facts."""
    rc, output = _site_check(tmp_path, tags, ("kt_serve", "kt_train"))
    assert rc != 0 and STOPPED_AT_PREFLIGHT in " ".join(output.split()), output[-3000:]
