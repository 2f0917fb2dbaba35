"""The KT host suite (tests/infra) against this host: CPU cores under a real cgroup CPU quota, the kt-kernel
variant the planner forces on kernels < 5.16, the python the probes run with, and health URLs with a
password (a real HTTP server asking for Basic auth)."""

from __future__ import annotations

import base64
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import testinfra

from ktinfra import doctor
from ktinfra.facts import from_capture
from ktinfra.plan.formats import forced_cpu_variant

INFRA = Path(__file__).parents[1] / "infra"
HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
sys.path.insert(0, str(INFRA))

import kthost  # noqa: E402

CPU_CGROUP = Path("/sys/fs/cgroup/cpu")  # cgroup v1 here; v2 has cpu.max in the unified tree


def _make_quota_cgroup(tmp_name: str, quota_us: int, period_us: int = 100000) -> Path:
    if (Path("/sys/fs/cgroup") / "cgroup.controllers").exists():
        group = Path("/sys/fs/cgroup") / tmp_name
        group.mkdir()
        (group / "cpu.max").write_text(f"{quota_us} {period_us}")
    else:
        group = CPU_CGROUP / tmp_name
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(str(period_us))
        (group / "cpu.cfs_quota_us").write_text(str(quota_us))
    return group


@pytest.fixture
def half_cpu_group():
    """A real cgroup with a CPU quota of half a CPU (this machine's root may make one)."""
    group = _make_quota_cgroup(f"kt_infra_quota_{os.getpid()}", 50000)
    yield group
    group.rmdir()


def _in_group(group: Path, command: str) -> str:
    done = subprocess.run(
        ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec {command}'],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout


def test_cpu_probe_counts_cores_as_facts_does_under_a_cpu_quota(half_cpu_group):
    """physical_cores sized CPUInfer's threads from the CPUs the process may run on: under a quota of half a
    CPU on this 2-core machine the suite asked for 2 worker threads where `ktinfra facts` (and the plan) say
    1 core. The suite's count now is facts' count."""
    probe = json.loads(
        _in_group(half_cpu_group, kthost.probe_command(sys.executable, "cpu")).splitlines()[-1]
    )
    facts_out = _in_group(half_cpu_group, f"{sys.executable} -m ktinfra facts --json")
    facts = json.loads(facts_out[facts_out.index("{") :])["cpu"]
    cpu = kthost.facts_cores(probe)
    assert facts["quota_cpus"] == 0.5 and cpu["quota_cpus"] == 0.5
    assert cpu["physical_cores"] == facts["physical_cores"] == 1
    assert probe["physical_cores"] == len(os.sched_getaffinity(0))  # affinity alone: what the suite used


def test_cpu_probe_without_a_quota_keeps_the_cpusets_cores():
    probe = json.loads(
        subprocess.run(kthost.probe_command(sys.executable, "cpu"), shell=True, capture_output=True,
                       text=True, check=True).stdout.splitlines()[-1]
    )  # fmt: skip
    facts = json.loads(subprocess.run([sys.executable, "-m", "ktinfra", "facts", "--json"],
                                      capture_output=True, text=True, check=True).stdout)["cpu"]  # fmt: skip
    assert kthost.facts_cores(probe)["physical_cores"] == facts["physical_cores"]


def _probe_like(capture: str, kernel: str, refused: bool) -> dict:
    """The cpu probe's answer on a captured host: its cpuinfo flags, and the kernel's arch_prctl answer."""
    flags = set()
    for line in (HOSTS / capture / "cpuinfo.txt").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    return {
        "kernel": kernel,
        "flags": sorted(f for f in flags if f.startswith(("avx", "amx"))),
        "req_rc": -1 if refused else 0,
        "req_error": "Invalid argument" if refused else None,
        "xtiledata_granted": not refused,
    }


def test_variant_on_an_amx_host_with_a_kernel_before_5_16_is_the_planners():
    """synthetic-2s-8470q-amx (Xeon 8470Q, Linux 5.15): the plan forces avx512_bf16 through
    KT_KERNEL_CPU_VARIANT; the suite expected amx there, the library that faults on the first tile."""
    facts = from_capture(HOSTS / "synthetic-2s-8470q-amx")
    planned, _ = forced_cpu_variant(facts)
    expected, why = kthost.planned_kt_variant(
        _probe_like("synthetic-2s-8470q-amx", "5.15.0-125-generic", True)
    )
    assert planned == expected == "avx512_bf16"
    assert "5.15.0-125-generic" in why and "KT_KERNEL_CPU_VARIANT=avx512_bf16" in why


@pytest.mark.parametrize(
    ("kernel", "refused", "variant"),
    [
        ("6.8.0-49-generic", False, "amx"),
        ("5.15.0-125-generic", False, "amx"),
        ("6.8.0-49-generic", True, "avx512_bf16"),
    ],
)  # fmt: skip
def test_variant_follows_the_kernels_own_answer(kernel, refused, variant):
    """A 5.15 distribution kernel with the backport grants the tiles (amx); a new one refusing does not."""
    assert kthost.planned_kt_variant(_probe_like("h100-xeon-amx-16c", kernel, refused))[0] == variant


def _stand_in_kt_kernel(tmp_path: Path, init: str) -> str:
    """A python (a script) that imports a stand-in kt_kernel package: `init` and an extension without MoE."""
    site = tmp_path / "site"
    (site / "kt_kernel").mkdir(parents=True)
    (site / "kt_kernel" / "__init__.py").write_text(
        init + "import types\nkt_kernel_ext = types.SimpleNamespace(moe=None)\n"
    )
    python = f"{tmp_path}/py"
    Path(python).write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    os.chmod(python, 0o755)
    return python


def test_forced_variant_reaches_the_probes_python(tmp_path):
    """The forced library is asked for as the serve instance asks: KT_KERNEL_CPU_VARIANT in the process's
    environment, through the testinfra backend's shell."""
    python = _stand_in_kt_kernel(
        tmp_path, "import os\n__cpu_variant__ = os.environ.get('KT_KERNEL_CPU_VARIANT', 'amx')\n"
    )
    host = testinfra.get_host("local://")
    args = json.dumps({"mode": "info"})
    assert kthost.run_probe(host, python, "kt_kernel_moe", args)["variant"] == "amx"
    env = {"KT_KERNEL_CPU_VARIANT": "avx512_bf16"}
    assert kthost.run_probe(host, python, "kt_kernel_moe", args, env=env)["variant"] == "avx512_bf16"


def test_a_probe_answer_before_kt_kernels_goodbye_is_read(tmp_path):
    """kt-kernel's CPUInfer prints 'CPUInfer[0x...]: Goodbye' at exit through C's stdout buffer; in a docker
    exec on an AMX host it came after the probe's JSON, and the suite read the last line: JSONDecodeError,
    both forward checks 'error' (molecule envs, CI 2026-12-02). The stand-in flushes Python's stdout at exit
    and then writes the line to the file descriptor itself, as the C buffer did."""
    python = _stand_in_kt_kernel(
        tmp_path,
        "import atexit, os, sys\n__cpu_variant__ = 'amx'\n"
        "atexit.register(lambda: (sys.stdout.flush(), os.write(1, b'CPUInfer[0x5557]: Goodbye\\n')))\n",
    )
    host = testinfra.get_host("local://")
    command = kthost.probe_command(python, "kt_kernel_moe", json.dumps({"mode": "info"}))
    assert host.run(command).stdout.strip().splitlines()[-1] == "CPUInfer[0x5557]: Goodbye"
    assert kthost.run_probe(host, python, "kt_kernel_moe", json.dumps({"mode": "info"}))["variant"] == "amx"
    with pytest.raises(kthost.ProbeError, match="printed no JSON answer"):
        kthost.probe_answer("x", ["CPUInfer: Hello", "{not json", "CPUInfer: Goodbye"])


@pytest.fixture
def basic_auth_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            ok = self.headers.get("Authorization") == "Basic " + base64.b64encode(b"kt:s3cret").decode()
            self.send_response(200 if ok else 401)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _health(url: str, **options) -> doctor.Check:
    report = doctor.run(["local://"], "any", select="health_endpoint", health_url=url, **options)
    [check] = report.checks
    return check


def test_health_url_with_credentials_is_checked_with_basic_auth(basic_auth_server):
    """urllib took 'kt:s3cret@127.0.0.1' for the host name: a server that answers 200 failed the check with
    'Name or service not known'. The output shows the URL with its credentials as ***."""
    check = _health(f"http://kt:s3cret@{basic_auth_server}/health")
    assert check.status == "passed", check
    assert f"http://***@{basic_auth_server}/health" in check.output and "s3cret" not in check.output


def test_health_failure_message_masks_the_password(basic_auth_server):
    check = _health(f"http://kt:wrongpass@{basic_auth_server}/health")
    assert check.status == "failed", check
    assert "wrongpass" not in check.message and "wrongpass" not in check.output
    assert f"http://***@{basic_auth_server}/health: HTTPError HTTP Error 401" in check.message


@pytest.mark.parametrize(
    "url", ["http://kt:s3cret@/health", "http://kt:s3cret@h:99999/health", "http://kt:s3cret@[::1/health"]
)
def test_bad_health_url_error_masks_the_password(url):
    with pytest.raises(doctor.DoctorError, match=r"\*\*\*@") as caught:
        doctor.run(["local://"], "any", select="health_endpoint", health_url=url)
    assert "s3cret" not in str(caught.value)


def test_health_check_runs_with_the_given_python_when_python3_is_not_on_path(basic_auth_server, tmp_path):
    """A target without python3 on PATH: the health check ran `python3 -c ...` ('python3: not found'). It
    runs with the python the suite is given (ktinfra doctor --python)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):  # this PATH, every python left out
        for tool in os.listdir(folder) if os.path.isdir(folder) else []:
            if not tool.startswith("python") and not (bin_dir / tool).exists():
                os.symlink(os.path.join(folder, tool), bin_dir / tool)
    env = {**os.environ, "PATH": str(bin_dir)}
    url = f"http://kt:s3cret@{basic_auth_server}/health"
    base = [sys.executable, "-m", "pytest", str(INFRA), "--hosts=local://", "--kt-role=any", "-q",
            "-p", "no:cacheprovider", "-k", "health_endpoint", f"--kt-health-url={url}"]  # fmt: skip
    bare = subprocess.run(base, capture_output=True, text=True, env=env)
    assert bare.returncode == 1
    assert "no python3 on the PATH of local://" in bare.stdout and "--kt-python" in bare.stdout
    assert "Traceback" not in bare.stdout
    given = subprocess.run([*base, f"--kt-python={sys.executable}"], capture_output=True, text=True, env=env)
    assert given.returncode == 0, given.stdout[-2000:]


def test_cpu_probe_reads_the_cgroup_files_ktinfra_facts_reads():
    """The probe runs on the target without ktinfra, so it keeps its own copy of CGROUP_FILES: a file added
    to ktinfra.facts.capture (a quota read from it) but not to the probe would be missing from its answer."""
    import importlib.util

    from ktinfra.facts.capture import CGROUP_FILES

    spec = importlib.util.spec_from_file_location("cpu_probe", kthost.PROBES / "cpu.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    assert probe.CGROUP_FILES == CGROUP_FILES
