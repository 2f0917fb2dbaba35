"""--skip-tags must not skip kt_preflight for the roles a run still runs (playbooks/provision.yml).

Before, the preflight play's role was tagged preflight, envs, tuning, store, serve and train, so that
--tags of any of them ran it; but --skip-tags of any one of them skipped it too: `site.yml --skip-tags
train` (serve, don't train), `--skip-tags store` (don't fetch models again) or `provision.yml --skip-tags
tuning` ran kt_serve, kt_python_env ... without it, and those refuse to run without its facts ("needs
kt_preflight to run first"). Now it is tagged always + preflight, and provision.yml's pre-tasks end the
hosts whose run the --tags do not select, as before.

Real ansible-playbook runs of the real playbooks, with each role replaced (ANSIBLE_ROLES_PATH) by one that
says on which host it ran, on local-connection hosts.
"""

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
ROLES = [
    "kt_preflight",
    "kt_python_env",
    "kt_host_tuning",
    "kt_model_store",
    "kt_serve",
    "kt_train",
    "kt_router",
]
INVENTORY = f"""
[kt_serve]
s1
both
[kt_train]
t1
both
[kt_router]
r1
[all:vars]
ansible_connection=local
ansible_python_interpreter={sys.executable}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stubs")
    for role in ROLES:
        (tmp / "roles" / role / "tasks").mkdir(parents=True)
        (tmp / "roles" / role / "tasks" / "main.yml").write_text(
            f'- ansible.builtin.debug: {{msg: "RAN {role} {{{{ inventory_hostname }}}}"}}\n'
            + ("- ansible.builtin.set_fact: {kt_train_handed_over: [x]}\n" if role == "kt_train" else "")
        )
    (tmp / "hosts").write_text(INVENTORY)
    return tmp


def ran(site: Path, playbook: str, *args: str) -> list[tuple[str, str]]:
    """(role, host) in the order they ran."""
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(site / "roles"), ANSIBLE_LOCALHOST_WARNING="false")
    proc = subprocess.run(
        [str(PLAYBOOK), "-i", str(site / "hosts"), str(ROOT / "playbooks" / playbook),
         "-e", "ansible_become=false", *args],
        capture_output=True, text=True, env=env, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return re.findall(r'"msg": "RAN (\w+) (\w+)"', proc.stdout)


def assert_preflight_first(runs: list[tuple[str, str]]) -> None:
    """kt_preflight ran on each host, once, before any role that reads its facts ran there."""
    for i, (role, host) in enumerate(runs):
        if role in ("kt_python_env", "kt_host_tuning", "kt_model_store", "kt_serve", "kt_train"):
            assert ("kt_preflight", host) in runs[:i], (role, host, runs)
    assert all(n == 1 for (role, _), n in Counter(runs).items() if role == "kt_preflight"), runs


@pytest.mark.parametrize(
    ("playbook", "skip", "gone"),
    [
        ("site.yml", "train", {"kt_train"}),
        # slow: preflight's role is tagged always, which no --skip-tags skips: the ("site.yml", "train") case
        pytest.param("site.yml", "store", {"kt_model_store"}, marks=pytest.mark.slow),
        # slow: as the ("site.yml", "train") case; train.yml re-applies kt_serve under its train tag
        pytest.param("site.yml", "serve", set(), marks=pytest.mark.slow),
        # slow: serve.yml's import of provision.yml, as in the ("site.yml", "train") case
        pytest.param("serve.yml", "store", {"kt_model_store"}, marks=pytest.mark.slow),
        # slow: train.yml's import of provision.yml, as in the ("site.yml", "train") case
        pytest.param("train.yml", "store", {"kt_model_store"}, marks=pytest.mark.slow),
        ("provision.yml", "tuning", {"kt_host_tuning"}),
        # slow: provision.yml alone, its always-tagged preflight: the ("provision.yml", "tuning") case
        pytest.param("provision.yml", "envs", {"kt_python_env"}, marks=pytest.mark.slow),
    ],
)
def test_skipping_a_tag_keeps_preflight_for_the_roles_still_run(site, playbook, skip, gone):
    runs = ran(site, playbook, "--skip-tags", skip)
    assert {role for role, _ in runs} & gone == set(), runs
    assert_preflight_first(runs)
    assert any(role not in ("kt_preflight", "kt_router") for role, _ in runs), runs


@pytest.mark.parametrize(
    "tags",
    [
        # slow: the pre-task that ends the hosts of an import the --tags do not select, as in the "train"
        # case; test_preflight_facts.py::test_a_serve_run_of_site_yml_leaves_train_only_hosts_alone for serve
        pytest.param("serve", marks=pytest.mark.slow),
        "train",
        # slow: in both imports' kt_provision_for_tags, as the "envs" case; and
        # test_preflight_facts.py::test_a_host_that_serves_and_trains_gets_preflight_under_either_tag[store]
        pytest.param("store", marks=pytest.mark.slow),
        "envs",
        # slow: in both imports' kt_provision_for_tags, every host provisioned once: the "envs" case
        pytest.param("tuning", marks=pytest.mark.slow),
        # slow: in both imports' kt_provision_for_tags, every host provisioned once: the "envs" case
        pytest.param("preflight", marks=pytest.mark.slow),
        # slow: in both imports' kt_provision_for_tags, every host provisioned once: the "envs" case
        pytest.param("provision", marks=pytest.mark.slow),
    ],
)
def test_a_tagged_run_still_runs_preflight_first_on_the_selected_hosts(site, tags):
    runs = ran(site, "site.yml", "--tags", tags)
    assert_preflight_first(runs)
    hosts = {host for role, host in runs if role == "kt_preflight"}
    expected = {"serve": {"s1", "both"}, "train": {"t1", "both"}}.get(tags, {"s1", "t1", "both"})
    assert hosts == expected, runs


def test_the_router_run_runs_no_preflight(site):
    assert ran(site, "site.yml", "--tags", "router") == [("kt_router", "r1")]
    assert ran(site, "provision.yml", "--tags", "router") == []


def test_skip_tags_preflight_still_skips_it(site):
    runs = ran(site, "provision.yml", "--skip-tags", "preflight", "--tags", "tuning")
    assert {role for role, _ in runs} == {"kt_host_tuning"}, runs
