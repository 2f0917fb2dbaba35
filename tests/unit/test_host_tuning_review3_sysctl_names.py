"""kt_host_tuning: sysctl names as sysctl.d (systemd-sysctl) reads them.

A name whose first separator is a slash is a path as it is, and in the dotted form dots and slashes swap: both
net/ipv4/conf/eth0.100/rp_filter and net.ipv4.conf.eth0/100.rp_filter are eth0.100's (a VLAN interface).
Before, kt-tune.sh turned every dot into a slash (.../eth0/100/rp_filter) and reported them absent while
sysctl.d set them at boot. A name with an empty, . or .. part (vm..swappiness) was applied now through
/proc/sys/vm//swappiness, but systemd-sysctl refuses a path that is not normalized: it failed at every boot.
kt-tune.sh runs for real on a directory standing in for /proc/sys; the input check by real ansible (-c local).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from role_play import ROLES, run_play

ROLE = ROLES / "kt_host_tuning"


def tune(root: Path, name: str, value: str) -> dict:
    env = dict(os.environ, KT_TUNE_SYSCTL_ROOT=str(root))
    out = subprocess.run(["sh", str(ROLE / "files" / "kt-tune.sh"), "sysctl", name, value],
                         capture_output=True, text=True, env=env, check=True).stdout  # fmt: skip
    return json.loads(out)


@pytest.mark.parametrize("name", ["net.ipv4.conf.eth0/100.rp_filter", "net/ipv4/conf/eth0.100/rp_filter"])
def test_a_name_with_a_dot_in_a_part_reaches_that_part(tmp_path, name):
    path = tmp_path / "net" / "ipv4" / "conf" / "eth0.100" / "rp_filter"
    path.parent.mkdir(parents=True)
    path.write_text("1\n")
    assert tune(tmp_path, name, "2")["status"] == "set"
    assert path.read_text() == "2\n"
    assert tune(tmp_path, name, "2")["status"] == "applied"


@pytest.mark.parametrize("name", ["vm..swappiness", "net/../vm/swappiness"])
def test_kt_tune_writes_no_name_with_an_empty_or_dot_part(tmp_path, name):
    path = tmp_path / "vm" / "swappiness"
    path.parent.mkdir()
    path.write_text("60\n")
    report = tune(tmp_path, name, "10")
    assert report["status"] == "absent" and "is not a sysctl name" in report["reason"], report
    assert path.read_text() == "60\n"


def validate(tmp: Path, sysctls: dict) -> tuple[int, str]:
    tasks = [{"ansible.builtin.include_role": {"name": "kt_host_tuning", "tasks_from": "validate"}}]
    return run_play(tmp, tasks, {"kt_host_tuning_sysctls": sysctls})


@pytest.mark.parametrize("name", ["vm..swappiness", "net/../../etc/hostname", "vm.swappiness."])
def test_the_input_check_refuses_a_name_with_an_empty_or_dot_part(tmp_path, name):
    rc, output = validate(tmp_path, {name: 10})
    assert rc != 0
    assert f"kt_host_tuning_sysctls: bad name {json.dumps(name)}: " in output, output[-3000:]
    assert "no empty, . or .. part" in output


def test_the_input_check_takes_both_forms_of_a_dotted_part(tmp_path):
    rc, output = validate(
        tmp_path, {"net.ipv4.conf.eth0/100.rp_filter": 2, "net/ipv4/conf/eth0.100/rp_filter": 2}
    )
    assert rc == 0, output[-3000:]
