"""Helpers of the KT host suite: role expectations, probes run on the target, env discovery.

Probes are stdlib-first Python scripts under probes/; they run on the target through whatever testinfra
backend is in use (local, docker, ssh, ansible) by passing their source on the command line.
"""

from __future__ import annotations

import base64
import json
import shlex
import signal
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
from testinfra.backend import base as testinfra_base

from ktinfra.facts.cpu import ISA_FLAGS
from ktinfra.plan.formats import CPU_VARIANT_ENV, NON_AMX_VARIANTS, forced_cpu_variant


def _decode(backend, data: bytes) -> str:
    """A command's output as text, a byte that is not in the target's encoding replaced. testinfra decodes it
    strictly, and what the checks read holds other programs' bytes (kt-kernel's and its libraries' logs on a
    probe's stderr, env files, nvidia-smi): one byte that is not UTF-8 made the check an error reading
    "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff" instead of its own answer."""
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        return data.decode(backend.encoding, errors="replace")


testinfra_base.BaseBackend.decode = _decode  # every backend that returns bytes (local, ssh, docker, ...)

PROBES = Path(__file__).parent / "probes"
ROLES = ("serve", "sft", "any")
AMX_FLAGS = ("amx_tile", "amx_int8", "amx_bf16")
MIN_COMPUTE_CAPABILITY = (8, 0)
# The module that marks a python environment as the stack profile's env of that kind.
ENV_MARKERS = {"inference": "kt_kernel", "sft": "llamafactory"}
ENV_ROOTS = (  # ktinfra render's and the kt_python_env role's prefixes first
    "/opt/ktinfra/envs/{name}",
    "/opt/kt/envs/{name}",
    "/opt/conda/envs/{name}",
    "/root/miniconda3/envs/{name}",
    "/root/anaconda3/envs/{name}",
    "$HOME/miniconda3/envs/{name}",
    "/opt/venvs/{name}",
)


class ProbeError(RuntimeError):
    def __init__(self, message: str, rc: int | None = None):
        super().__init__(message)
        self.rc = rc

    @property
    def signal_name(self) -> str | None:
        """The signal that killed the probe's python: the shell reports 128+N, a direct exec -N."""
        rc = self.rc
        number = -rc if rc is not None and rc < 0 else rc - 128 if rc is not None and 128 < rc < 160 else None
        if number is None:
            return None
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"


GPU_QUERY = ("index", "name", "memory.total", "compute_cap", "driver_version", "uuid", "mig.mode.current")


def parse_gpu_rows(stdout: str) -> tuple[list[dict], list[str]]:
    """`nvidia-smi --query-gpu=<GPU_QUERY> --format=csv,noheader,nounits` -> one dict per GPU, and the lines
    that are no GPU row (nvidia-smi prints warnings such as "WARNING: infoROM is corrupted" on stdout)."""
    rows, other = [], []
    for line in stdout.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) == len(GPU_QUERY) and cells[0].isdigit():
            rows.append(dict(zip(GPU_QUERY, cells, strict=True)))
        elif line.strip():
            other.append(line.strip())
    return rows, other


def torch_gpu_problems(devices: list[dict], gpus: list[dict]) -> list[str]:
    """How torch's view (probes/pyenv.py --torch: PCI bus order, no CUDA_VISIBLE_DEVICES) differs from
    nvidia-smi's GPUs. Devices are matched by UUID where torch reports it, else by position; a GPU in MIG
    mode shows as its MIG instances (or none), so it is left out of the count."""
    whole = [g for g in gpus if g.get("mig.mode.current", "").lower() != "enabled"]
    if len(whole) < len(gpus):
        return [] if devices else ["torch sees no CUDA device, nvidia-smi lists MIG-enabled GPUs"]
    if len(devices) != len(gpus):
        return [f"torch sees {len(devices)} GPUs ({[d['name'] for d in devices]}), nvidia-smi {len(gpus)}"]
    by_uuid = {g.get("uuid", "").removeprefix("GPU-"): g for g in gpus}
    problems = []
    for position, device in enumerate(devices):
        uuid = (device.get("uuid") or "").removeprefix("GPU-")
        gpu = by_uuid.get(uuid) if uuid else gpus[position]
        if gpu is None:
            problems.append(f"torch device {position} ({device['name']}, {uuid}) is no GPU nvidia-smi lists")
        elif ".".join(map(str, device["capability"])) != gpu["compute_cap"]:
            problems.append(
                f"torch device {position} {device['name']}: capability {device['capability']}, "
                f"nvidia-smi GPU {gpu['index']} {gpu['name']}: {gpu['compute_cap']}"
            )
    return problems


@dataclass(frozen=True)
class Expect:
    """What a host of this role must have. Absent parts a role needs FAIL; others are not applicable.

    serve: GPU and kt-kernel; AMX too when the serve method is an AMX one (AMXINT8/AMXINT4, the plan's
    default on AMX hosts). sft: GPU, kt-kernel and AMX (KT's SFT MoE kernels are AMX-only).
    any: nothing is required. Whatever IS present is always checked in full, whatever the role.
    """

    role: str
    method: str = "AMXINT8"

    @property
    def needs_gpu(self) -> bool:
        return self.role in ("serve", "sft")

    @property
    def needs_kt_kernel(self) -> bool:
        return self.role in ("serve", "sft")

    @property
    def needs_amx(self) -> bool:
        return self.role == "sft" or (self.role == "serve" and self.method.upper().startswith("AMX"))

    def require(self, present: bool, needed: bool, what: str, why_absent: str) -> None:
        """Fail when a needed part is absent, skip (not applicable) when an unneeded one is."""
        if present:
            return
        if needed:
            pytest.fail(f"{what} required for role {self.role!r} but absent: {why_absent}", pytrace=False)
        pytest.skip(f"not applicable: {what} absent ({why_absent}); role {self.role!r} does not require it")


def require_env(env: dict, what: str) -> str:
    """The env's python; a failed check when the user named one that does not run, else a skip."""
    if env["python"]:
        return env["python"]
    if env.get("given"):
        pytest.fail(f"{what}: {env['why']}", pytrace=False)
    pytest.skip(f"{what} not installed: {env['why']}")


# What the kt-kernel probe never takes from the shell it runs in: KT_KERNEL_CPU_VARIANT there (a developer's
# export, or doctor's own over local://) forced a library no serve instance loads (the unit and supervisord
# program read it from the instance's env file only), and the variant check failed on a sound host. The
# check sets it itself where the plan forces one (run_probe's env).
PROBE_UNSET = {"kt_kernel_moe": (CPU_VARIANT_ENV,)}


def probe_command(python: str, name: str, *argv: str, env: dict | None = None) -> str:
    source = base64.b64encode((PROBES / f"{name}.py").read_bytes()).decode()
    code = f"import base64;exec(base64.b64decode('{source}'))"
    unset = [arg for key in PROBE_UNSET.get(name, ()) for arg in ("-u", key)]
    assigned = [f"{key}={value}" for key, value in (env or {}).items()]
    prefix = ["env", *unset, *assigned] if unset or assigned else []
    return shlex.join([*prefix, python, "-c", code, *argv])  # python is a path: a space or ; stays in it


# A probe's bound (kt-kernel's import and MoE forward take seconds, the H200 forward 1.1 s): unbounded, a
# CPUInfer pool that never returns or a CUDA init stuck in a hung driver held the suite, and doctor, for good.
PROBE_TIMEOUT = 300


def run_probe(host, python: str, name: str, *argv: str, env: dict | None = None) -> dict:
    result = host.run(f"timeout {PROBE_TIMEOUT} " + probe_command(python, name, *argv, env=env))
    if result.rc == 124:  # timeout's own (a probe killed by a signal still gives 128+N)
        raise ProbeError(f"probe {name} with {python} did not finish within {PROBE_TIMEOUT} s (hung)")
    lines = result.stdout.strip().splitlines()
    if result.rc != 0 or not lines:
        raise ProbeError(
            f"probe {name} with {python} exited {result.rc}: {result.stderr.strip()[-1500:]}", rc=result.rc
        )
    return probe_answer(name, lines)


def probe_answer(name: str, lines: list[str]) -> dict:
    """A probe's answer: the last stdout line that is a JSON object. Not simply the last line: kt-kernel's
    CPUInfer prints 'CPUInfer[0x...]: Goodbye' from its destructor at exit, through C's stdout buffer, which
    may be flushed after Python's (seen in a docker exec on an AMX host: JSONDecodeError, both forward checks
    'error', while the same probe run directly printed its JSON last)."""
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if isinstance(answer, dict):
                return answer
    raise ProbeError(f"probe {name} printed no JSON answer; its last lines: {lines[-3:]}")


def facts_cores(cpu: dict) -> dict:
    """The cpu probe's answer with physical_cores as `ktinfra facts` counts them from the same CPUs and
    cgroup files (ktinfra.facts, here on the controller): a CPU quota (cpu.max, cpu.cfs_quota_us) lowers
    them, as the plan's thread counts assume. The probe alone counted the cores of every CPU the process may
    run on, so a 16-CPU quota on a 128-CPU host asked CPUInfer for 64 worker threads."""
    from ktinfra.facts.cgroup import parse_cgroup
    from ktinfra.facts.cpu import cpu_facts
    from ktinfra.facts.cpulist import format_cpulist

    if "cpu_rows" not in cpu:  # a probe from before the rows: its own count
        return cpu
    rows = "".join(",".join(str(v) for v in row) + "\n" for row in cpu["cpu_rows"])
    files = {
        "lscpu-p.txt": "# CPU,Core,Socket,Node\n" + rows,
        "proc-self-status.txt": f"Cpus_allowed_list:\t{format_cpulist(set(cpu['usable_cpus']))}\n",
        "cgroup.txt": cpu.get("cgroup") or "",
    }
    facts = cpu_facts(files, parse_cgroup(files["cgroup.txt"]))
    if not facts.get("physical_cores"):
        return cpu
    keys = ("physical_cores", "physical_cores_basis", "quota_cpus")
    return {**cpu, "probe_physical_cores": cpu["physical_cores"], **{key: facts[key] for key in keys}}


def pool_nodes(cpu: dict) -> list:
    """The NUMA nodes the kt-kernel probe gives a thread pool: every node, but no more than there are threads
    (a container quota of fewer CPUs than nodes left a pool of 0 threads, which CPUInfer cannot run)."""
    return cpu["numa_nodes"][: max(1, cpu["physical_cores"])]


def conda_envs_dir(host) -> str | None:
    """<conda>/envs of the target's conda ($CONDA_EXE, else conda on PATH): kt_python_env makes its conda envs
    there wherever that conda is (kt_python_env_conda_exe=/opt/miniconda3/bin/conda, a ~/miniforge3 on
    PATH), and the suite looked in a fixed list of prefixes only: such an env was 'not installed', and
    role serve failed 'kt-kernel required ... but absent' on a host that has it."""
    found = host.run('printf "%s\\n" "${CONDA_EXE:-}"; command -v conda')
    conda = next((line.strip() for line in found.stdout.splitlines() if line.strip().startswith("/")), None)
    return str(PurePosixPath(conda).parent.parent / "envs") if conda else None


def find_env_python(host, env_name: str, marker: str) -> tuple[str | None, str]:
    """First python holding `marker`: the env's usual prefixes first (the target's conda's envs among them),
    then python3 on PATH."""
    roots = [root.format(name=env_name) for root in ENV_ROOTS]
    conda_envs = conda_envs_dir(host)
    if conda_envs and f"{conda_envs}/{env_name}" not in roots:
        roots.append(f"{conda_envs}/{env_name}")
    candidates = [root + "/bin/python" for root in roots] + ["python3"]
    check = f"import importlib.util,sys; sys.exit(0 if importlib.util.find_spec({marker!r}) else 1)"
    for python in candidates:
        quoted = python if python.startswith("$HOME") else shlex.quote(python)
        found = host.run(f'command -v {quoted} >/dev/null 2>&1 && {quoted} -c "{check}"')
        if found.rc == 0:
            return host.run(f"command -v {quoted}").stdout.strip(), ""
    where = "the usual prefixes" + "".join(f" or {root}" for root in roots[len(ENV_ROOTS) :])
    return None, f"no python with {marker}: env {env_name!r} not in {where}, nor python3 on PATH"


def parse_version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("-")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def planned_kt_variant(cpu: dict) -> tuple[str, str | None]:
    """(the kt-kernel variant a serve instance on this host loads, why it is forced or None). The planner's
    own rule (ktinfra.plan.formats.forced_cpu_variant): a CPU with AMX flags whose kernel does not grant the
    tiles (Linux < 5.16 without the backport, or a refusal) gets the best non-AMX library through
    KT_KERNEL_CPU_VARIANT in its env file; elsewhere kt-kernel picks from the flags (expected_kt_variant).
    The cpu probe asked the kernel itself, as `ktinfra facts` does (cpu.amx_permission)."""
    flags = set(cpu["flags"])
    if cpu.get("req_rc") is None:  # the probe could not ask (not x86_64): the release decides, as in facts
        permission = None
    elif cpu["req_rc"] == 0 and cpu.get("xtiledata_granted"):
        permission = "granted"
    else:
        permission = f"refused: {cpu.get('req_error') or 'not granted'}"
    isa = {key: flag in flags or flag.replace("_", "") in flags for key, flag in ISA_FLAGS.items()}
    facts = {"os": {"kernel": cpu["kernel"]}, "cpu": {"isa": isa, "amx_permission": permission}}
    forced, why = forced_cpu_variant(facts)
    return (forced, why) if forced else (expected_kt_variant(flags), None)


def expected_kt_variant(flags: set[str]) -> str:
    """The kt-kernel CPU variant a host with these /proc/cpuinfo flags should load (best first): amx, then the
    planner's own ladder of kt-kernel's other libraries (cpuinfo writes some flags without the underscore)."""
    best_non_amx = NON_AMX_VARIANTS[0][1]
    for variant, needed in [("amx", (*AMX_FLAGS, *best_non_amx)), *NON_AMX_VARIANTS]:
        if all(f in flags or f.replace("_", "") in flags for f in needed):
            return variant
    return "avx2"
