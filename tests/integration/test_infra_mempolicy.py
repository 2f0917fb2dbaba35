"""The suite's NUMA memory-policy check on a real container: docker's default seccomp profile refuses
set_mempolicy without CAP_SYS_NICE (kt-kernel then prints 'set_mempolicy: Operation not permitted' and
cannot keep a pool's expert weights on its node), and --cap-add SYS_NICE lets it through.

The cpu probe runs for real in the debian12-systemd container both ways. This machine has one NUMA node, so
the two-pool verdict is the check run on the real refused answer with the node list of a synthetic
two-node host (the probe's layout, nodes [0, 1]).
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

INFRA = Path(__file__).parents[1] / "infra"
IMAGE = "ktinfra/debian12-systemd:latest"
sys.path.insert(0, str(INFRA))
from kthost import Expect  # noqa: E402
from test_cpu import test_numa_memory_policy_permitted as check  # noqa: E402


def _probe(*docker_args: str) -> dict:
    name = f"kt-infra-mempolicy-{uuid.uuid4().hex[:8]}"
    run = ["docker", "run", "--rm", "--name", name, *docker_args, "-v", f"{INFRA / 'probes'}:/probes:ro",
           "--entrypoint", "python3", IMAGE, "/probes/cpu.py"]  # fmt: skip
    out = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def refused() -> dict:
    return _probe()


def test_default_container_is_refused_set_mempolicy(refused):
    assert (refused["mempolicy_rc"], refused["mempolicy_errno"]) == (-1, errno.EPERM), refused


def test_cap_sys_nice_permits_set_mempolicy():
    permitted = _probe("--cap-add", "SYS_NICE")
    assert (permitted["mempolicy_rc"], permitted["mempolicy_error"]) == (0, None), permitted
    check({**permitted, "numa_nodes": [0, 1], "physical_cores": 8}, Expect("serve"))  # passes: no raise


def test_refused_on_one_pool_is_not_applicable(refused):
    with pytest.raises(pytest.skip.Exception, match="one NUMA pool .*Operation not permitted"):
        check({**refused, "numa_nodes": [0], "physical_cores": 2}, Expect("serve"))


def test_refused_on_two_pools_fails_and_names_the_capability(refused):
    with pytest.raises(pytest.fail.Exception) as failed:
        check({**refused, "numa_nodes": [0, 1], "physical_cores": 8}, Expect("serve"))
    message = str(failed.value)
    assert "2 NUMA pools [0, 1]" in message and "--cap-add SYS_NICE" in message, message
    assert "EPERM: a seccomp profile, docker's default" in message, message
    # a quota of one CPU gives one pool, whatever the node count: nothing to bind
    with pytest.raises(pytest.skip.Exception, match="one NUMA pool"):
        check({**refused, "numa_nodes": [0, 1], "physical_cores": 1}, Expect("serve"))
    with pytest.raises(pytest.skip.Exception, match="role 'any' runs no kt-kernel"):
        check({**refused, "numa_nodes": [0, 1], "physical_cores": 8}, Expect("any"))
