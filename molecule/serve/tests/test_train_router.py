"""Verify of molecule/serve: the training recipe and unit, and sglang-router in front of the instances."""

from __future__ import annotations

import json
import re
import time

import yaml
from ansible_run import REPO, interrupt_playbook, main_pid, run_playbook

RECIPE = "/etc/ktinfra/train/tiny-sft.yaml"
ROUTER = "ktinfra-router.service"


def test_dataset_registered_in_dataset_info(host):
    info = json.loads(host.file("/srv/ktinfra/datasets/dataset_info.json").content_string)
    assert info["tiny_alpaca"] == {"file_name": "tiny_alpaca.json", "formatting": "alpaca"}
    rows = json.loads(host.file("/srv/ktinfra/datasets/tiny_alpaca.json").content_string)
    assert rows[1]["output"] == "5"


def test_recipe_points_at_store_paths_and_the_plan(host):
    recipe = yaml.safe_load(host.file(RECIPE).content_string)
    assert recipe["model_name_or_path"] == "/srv/ktinfra/models/tiny-qwen3-moe"
    assert recipe["dataset"] == "tiny_alpaca" and recipe["dataset_dir"] == "/srv/ktinfra/datasets"
    assert recipe["output_dir"] == "/srv/ktinfra/outputs/tiny-sft"
    plan = json.loads(host.file("/etc/ktinfra/plans/tiny-sft.json").content_string)
    assert recipe["lora_rank"] == plan["sft"]["lora_rank"]
    assert recipe["cutoff_len"] == plan["sft"]["cutoff_len"]


def test_training_unit_installed_but_not_started(host):
    assert host.file("/etc/systemd/system/ktinfra-train@.service").is_file
    env = host.file("/etc/ktinfra/train/tiny-sft.env")
    assert env.mode == 0o600 and f'KT_TRAIN_CONFIG="{RECIPE}"' in env.content_string
    assert not host.service("ktinfra-train@tiny-sft").is_running
    # accelerate lives in the kt-sft env (torch + CUDA), not installed here: the only complaint allowed
    result = host.run("systemd-analyze verify ktinfra-train@tiny-sft.service")
    problems = [line for line in result.stderr.splitlines() if line.strip()]
    assert all("/opt/kt/envs/kt-sft/bin/accelerate" in line for line in problems), problems


def workers(host) -> dict[str, bool]:
    """The router's worker table; with an API key set the router asks it for its own endpoints too."""
    script = (
        "import urllib.request as u; r = u.Request('http://127.0.0.1:30080/workers', "
        "headers={'Authorization': 'Bearer molecule-not-a-secret'}); print(u.urlopen(r).read().decode())"
    )
    out = host.check_output(f'python3 -c "{script}"')
    return {w["url"]: w["is_healthy"] for w in json.loads(out)["workers"]}


def test_router_refuses_requests_without_the_key(host):
    result = host.run(
        "python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:30080/workers')\""
    )
    assert result.rc == 1 and "401" in result.stderr


def test_router_runs_in_front_of_both_instances(host):
    router = host.service("ktinfra-router")
    assert router.is_enabled and router.is_running
    # the 0.0.0.0-bound instance is reached at its host's ansible_host, the loopback one only locally
    assert workers(host) == {"http://127.0.0.1:30000": True, "http://roles2-serve:30001": True}
    env = host.file("/etc/ktinfra/router/router.env")
    assert env.mode == 0o600 and env.user == "root"  # systemd reads it before dropping to the router's user


def test_router_runs_as_its_own_user(host):
    """Before: the unit had no User=, and the router, which listens on 0.0.0.0 here, ran as root."""
    pid = main_pid(host, ROUTER)
    status = host.file(f"/proc/{pid}/status").content_string
    uid = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
    assert host.user("ktinfra-router").uid == int(uid)
    assert re.search(r"^NoNewPrivs:\s+1$", status, re.M)
    assert host.user("ktinfra-router").shell == "/usr/sbin/nologin"


def wait_health(host, url: str, healthy: bool, seconds: int = 90) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if workers(host).get(url) is healthy:
            return True
        time.sleep(2)
    return False


def test_router_health_checks_its_workers(host):
    url = "http://roles2-serve:30001"
    host.check_output("systemctl stop ktinfra-serve@tiny-public")
    try:
        assert wait_health(host, url, False)
    finally:
        host.check_output("systemctl start ktinfra-serve@tiny-public")
    assert wait_health(host, url, True)


def _started_policy(host, pid: str) -> str:
    """The policy in the router's "Starting router on ... | policy: X { ... }" line, as process `pid` logged
    it. (Its /proc environ and cmdline cannot tell: the router sets its title "sglang::router" over them.)"""
    journal = host.check_output(f"journalctl _PID={pid} -o cat --no-pager")
    line = next(line for line in journal.splitlines() if "Starting router on" in line)
    return re.search(r"\| policy: (\w+)", re.sub(r"\x1b\[[0-9;]*m", "", line)).group(1)


def test_a_router_change_a_cut_off_run_wrote_reaches_the_router(host):
    """Ctrl-C after the run wrote router.env, before its handler. Before: the next run found the file in
    place, queued no restart, and the router went on with the old policy until it restarted."""
    router_yml = REPO / "playbooks" / "router.yml"
    pid = main_pid(host, ROUTER)
    assert _started_policy(host, pid) == "RoundRobin"
    changed = {"kt_router_policy": "random"}
    try:
        rc, output = interrupt_playbook(router_yml, changed, "kt_router : Install the unit")
        assert rc != 0, output[-3000:]
        assert "--policy random " in host.file("/etc/ktinfra/router/router.env").content_string
        assert main_pid(host, ROUTER) == pid  # the cut-off run left the old router running

        rc, output = run_playbook(router_yml, changed)
        assert rc == 0, output[-3000:]
        restarted = main_pid(host, ROUTER)
        assert restarted not in ("0", pid), output[-3000:]
        assert _started_policy(host, restarted) == "Random"

        rc, output = run_playbook(router_yml, changed)  # and only once
        assert rc == 0 and main_pid(host, ROUTER) == restarted, output[-3000:]
    finally:
        rc, output = run_playbook(router_yml)  # the scenario's own policy again
    assert rc == 0, output[-3000:]
    assert _started_policy(host, main_pid(host, ROUTER)) == "RoundRobin"
