"""Helpers of the KT host suite: role expectations, probes run on the target, env discovery.

Probes are stdlib-first Python scripts under probes/; they run on the target through whatever testinfra
backend is in use (local, docker, ssh, ansible) by passing their source on the command line.
"""

from __future__ import annotations

import base64
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from ktinfra.plan.formats import NON_AMX_VARIANTS

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
    pass


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


def probe_command(python: str, name: str, *argv: str) -> str:
    source = base64.b64encode((PROBES / f"{name}.py").read_bytes()).decode()
    code = f"import base64;exec(base64.b64decode('{source}'))"
    return shlex.join([python, "-c", code, *argv])  # python is a path: a space in it, or ;, stays in it


def run_probe(host, python: str, name: str, *argv: str) -> dict:
    result = host.run(probe_command(python, name, *argv))
    lines = result.stdout.strip().splitlines()
    if result.rc != 0 or not lines:
        raise ProbeError(f"probe {name} with {python} exited {result.rc}: {result.stderr.strip()[-1500:]}")
    return json.loads(lines[-1])


def find_env_python(host, env_name: str, marker: str) -> tuple[str | None, str]:
    """First python holding `marker`: the env's usual prefixes first, then python3 on PATH."""
    candidates = [root.format(name=env_name) + "/bin/python" for root in ENV_ROOTS] + ["python3"]
    check = f"import importlib.util,sys; sys.exit(0 if importlib.util.find_spec({marker!r}) else 1)"
    for python in candidates:
        quoted = python if python.startswith("$HOME") else shlex.quote(python)
        found = host.run(f'command -v {quoted} >/dev/null 2>&1 && {quoted} -c "{check}"')
        if found.rc == 0:
            return host.run(f"command -v {quoted}").stdout.strip(), ""
    return None, f"no python with {marker}: env {env_name!r} not in the usual prefixes, nor python3 on PATH"


def parse_version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("-")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def expected_kt_variant(flags: set[str]) -> str:
    """The kt-kernel CPU variant a host with these /proc/cpuinfo flags should load (best first): amx, then the
    planner's own ladder of kt-kernel's other libraries (cpuinfo writes some flags without the underscore)."""
    best_non_amx = NON_AMX_VARIANTS[0][1]
    for variant, needed in [("amx", (*AMX_FLAGS, *best_non_amx)), *NON_AMX_VARIANTS]:
        if all(f in flags or f.replace("_", "") in flags for f in needed):
            return variant
    return "avx2"
