"""kt_host_tuning: memlock and nofile where logins cannot get them.

limits.d is applied at each login by pam_limits, which cannot raise a hard limit above its own where that is
not permitted (a docker container without CAP_SYS_RESOURCE, as AutoDL's): it logs and the login keeps the
container's limit (shown in a Debian 12 container, hard memlock 64: su with pam_limits and `* hard memlock
unlimited` gave 64). The role wrote limits.d and said nothing; the tuning report had no limit at all. Now
kt-tune.sh checks each limit (kind `limit`) and the report says not_set with the reason. Here kt-tune.sh runs
with its hard limits lowered and, as root, as nobody, so raising them is not permitted either.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess

import pytest
from role_play import ROLES

TUNE = ROLES / "kt_host_tuning" / "files" / "kt-tune.sh"


def confined(memlock_kib: int, nofile: int):
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (memlock_kib * 1024, memlock_kib * 1024))
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, nofile), nofile))
        if os.geteuid() == 0:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)

    return lower


def limit(item: str, wanted: str) -> dict:
    command = ["sh", str(TUNE), "limit", item, wanted]
    out = subprocess.run(command, capture_output=True, text=True, check=True, preexec_fn=confined(64, 4096))
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    ("item", "wanted", "hard"), [("memlock", "unlimited", "64"), ("nofile", "1048576", "4096")]
)
def test_a_limit_above_one_that_cannot_be_raised_is_reported_not_set(item, wanted, hard):
    report = limit(item, wanted)
    assert report["status"] == "not_set" and report["before"] == hard, report
    assert report["reason"].startswith(
        f"logins keep the hard {item} limit {hard}: raising it is not permitted"
    ), report


@pytest.mark.parametrize(("item", "wanted"), [("memlock", "64"), ("memlock", "32"), ("nofile", "4096")])
def test_a_limit_at_or_below_the_hard_one_is_applied(item, wanted):
    assert limit(item, wanted)["status"] == "applied"


def test_the_role_reports_both_limits(tmp_path):
    """tasks/main.yml's steps for real (test_host_tuning_review3_refused_sysctl.play, writing into tmp_path):
    the report has memlock and nofile, each applied or not_set as this machine lets a login have them."""
    from test_host_tuning_review3_refused_sysctl import play

    rc, output, _ = play(tmp_path, {"ktinfra_test.swappiness": 10})
    assert rc == 0, output[-3000:]
    report = {s["setting"]: s for s in json.loads((tmp_path / "tuning.json").read_text())["settings"]}
    assert report["memlock"]["wanted"] == "unlimited" and report["nofile"]["wanted"] == "1048576", report
    assert {report["memlock"]["status"], report["nofile"]["status"]} <= {"applied", "not_set"}, report
