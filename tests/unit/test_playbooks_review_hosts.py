"""Which hosts playbooks/provision.yml provisions when run on its own (README, docs/readme/roles1.md:
`ansible-playbook -i inventories/<site>/hosts playbooks/provision.yml   # or site.yml`).

Before, its plays ran on `all`: with the example inventory that took in `gateway`, the CPU box that only
routes (kt_router), whose group_vars/all.yml kt_preflight_requests (a Qwen3 serve plan) fail there, and would
have put the two multi-GB envs and the host tuning on it. site.yml provisions only the kt_serve and kt_train
hosts, and the example's group_vars/all.yml says the provision roles run there. Now the plays take those two
groups; an inventory without either (a host list `-i 'a,b,'`, a molecule scenario's platforms) still gets
every host. Real `ansible-playbook --list-hosts` runs.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def hosts_per_play(playbook: str, inventory: str, *extra: str) -> list[set[str]]:
    proc = subprocess.run(
        [str(PLAYBOOK), "--list-hosts", "-i", inventory, str(ROOT / "playbooks" / playbook), *extra],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plays = re.split(r"\n\s*play #\d+ ", proc.stdout)[1:]
    assert plays, proc.stdout
    return [set(re.findall(r"^ {6}(\S+)$", play, re.M)) for play in plays]


def test_provision_alone_skips_the_router_only_host_of_the_example_inventory():
    plays = hosts_per_play("provision.yml", str(ROOT / "inventories" / "example" / "hosts"))
    assert plays == [{"gpu1", "gpu2"}] * 3


def test_provision_alone_provisions_the_hosts_site_yml_provisions():
    inventory = str(ROOT / "inventories" / "example" / "hosts")
    site = hosts_per_play("site.yml", inventory)
    provisioned_by_site = set().union(site[0], site[5])  # serve.yml's and train.yml's preflight plays
    assert hosts_per_play("provision.yml", inventory)[0] == provisioned_by_site


def test_a_router_that_also_serves_is_provisioned(tmp_path):
    inventory = tmp_path / "hosts"
    inventory.write_text("[kt_serve]\nbox1\n[kt_router]\nbox1\nedge\n")
    assert hosts_per_play("provision.yml", str(inventory)) == [{"box1"}] * 3


@pytest.mark.parametrize("inventory", ["a1,b2,", "INI"])
def test_an_inventory_without_the_groups_gets_every_host(tmp_path, inventory):
    if inventory == "INI":  # hosts outside any kt_ group, as molecule's platforms
        (tmp_path / "hosts").write_text("roles1-provision\nother\n")
        inventory, expected = str(tmp_path / "hosts"), {"roles1-provision", "other"}
    else:
        expected = {"a1", "b2"}
    assert hosts_per_play("provision.yml", inventory) == [expected] * 3


def test_kt_hosts_still_names_the_hosts():
    inventory = str(ROOT / "inventories" / "example" / "hosts")
    assert hosts_per_play("provision.yml", inventory, "-e", "kt_hosts=kt_router") == [{"gateway"}] * 3
    assert hosts_per_play("serve.yml", inventory)[0] == {"gpu1", "gpu2"}
    assert hosts_per_play("train.yml", inventory)[0] == {"gpu2"}
