"""A host without NUMA folders in /sys (a kernel without NUMA, a container hiding them): the cpu probe
counts its CPUs as node 0 and the suite asks CPUInfer for one pool there; the kt-kernel probe read the pool
threads' nodes from those folders, found none, and test_cpuinfer_builds_with_threadpool_per_numa_node
failed "no CPUInfer thread may run on NUMA node(s) [0] (allowed: [])" on a host that can work.

Run for real in the debian12-systemd container with an empty tmpfs over /sys/devices/system/node; the
threads are real threads of the probe's python, read back from /proc as the probe reads CPUInfer's.
`make infra-docker` runs it after docker-ready (in tests/unit it skipped wherever the unit lane ran before
docker was installed, as on a fresh CI machine).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

PROBES = Path(__file__).parents[1] / "infra" / "probes"
IMAGE = "ktinfra/debian12-systemd:latest"

THREADS = """
import json, threading
ns = {"__name__": "probe"}
exec(open("/probes/kt_kernel_moe.py").read(), ns)
before = ns["_tasks"]()
stop = threading.Event()
workers = [threading.Thread(target=stop.wait) for _ in range(2)]
for w in workers:
    w.start()
pool = ns["_pool_threads"](before)
stop.set()
print(json.dumps(pool))
"""


def test_pool_threads_reach_node_0_where_sysfs_has_no_numa_nodes():
    name = f"kt-infra-review2-{uuid.uuid4().hex[:8]}"
    base = ["docker", "run", "--rm", "--name", name, "--tmpfs", "/sys/devices/system/node",
            "-v", f"{PROBES}:/probes:ro", "--entrypoint", "python3", IMAGE]  # fmt: skip
    cpu = subprocess.run([*base, "/probes/cpu.py"], capture_output=True, text=True, timeout=120)
    assert cpu.returncode == 0, cpu.stderr[-2000:]
    nodes = json.loads(cpu.stdout.splitlines()[-1])["numa_nodes"]
    assert nodes == [0]
    pool = subprocess.run([*base, "-c", THREADS], capture_output=True, text=True, timeout=120)
    assert pool.returncode == 0, pool.stderr[-2000:]
    found = json.loads(pool.stdout.splitlines()[-1])
    assert found["threads_started"] == 2
    # what test_cpuinfer_builds_with_threadpool_per_numa_node asks of them
    assert not sorted(set(nodes) - set(found["allowed_nodes"])), found
