"""`ktinfra doctor --hosts docker://CONTAINER` against the real kt-0.7 envs this scenario installed.

Every CI stage that runs the doctor suite (infra-local, infra-docker, infra-ssh, image-test's verify) has
no KT env, so there the env checks (profile pins, sglang's --kt-* flags) and the kt-kernel import/variant
checks only ever came out "skipped": a pins check that passed a wrong env or failed the right one, and a
kt-kernel probe that broke on the real package, would have gone unseen. Here they run on the real envs,
pass, and fail on a wrong env or pin. After test_envs.py (file order): doctor imports torch (writes .pyc).
"""

import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
INFER = "/opt/kt/envs/kt-kernel/bin/python"
SFT = "/opt/kt/envs/kt-sft/bin/python"


def doctor(host, *args: str) -> tuple[int, dict]:
    """This tree's `ktinfra doctor --role any` over docker:// on the scenario's container: exit, checks."""
    hosts = f"docker://{host.backend.get_hostname()}"  # the ansible backend's host: the container's name
    command = [sys.executable, "-m", "ktinfra", "doctor", "--hosts", hosts, "--role", "any", *args, "--json"]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.stdout.startswith("{"), out.stderr[-3000:]
    report = json.loads(out.stdout)
    return out.returncode, {c["id"]: c for c in report["checks"]}


def test_doctor_passes_the_real_envs_and_kt_kernel(host):
    rc, checks = doctor(host, "--python", INFER, "--sft-python", SFT)
    status = {name: check["status"] for name, check in checks.items()}
    print(json.dumps(status, indent=1))
    amx = "passed" if " amx_tile" in host.file("/proc/cpuinfo").content_string else "skipped"
    assert status == {
        "envs.env_matches_profile_pins[inference]": "passed",
        "envs.env_matches_profile_pins[sft]": "passed",
        "envs.sglang_lists_kt_flags": "passed",
        "kt_kernel.kt_kernel_imports": "passed",
        # kt-kernel loaded the variant kthost.expected_kt_variant reads off this CPU's /proc/cpuinfo flags:
        # avx2 on the CI's AMD EPYC (AVX2, neither AVX-512 nor AMX: see test_envs.py), amx on an AMX host
        "kt_kernel.kt_kernel_loads_best_variant": "passed",
        # AMX only: not applicable to role any on a CPU without it
        "kt_kernel.cpuinfer_builds_with_threadpool_per_numa_node": amx,
        "kt_kernel.amxint8_moe_matches_float_reference": amx,
        "cpu.amx_cpu_flags": amx,
        "cpu.kernel_new_enough_for_amx": amx,
        "cpu.amx_tile_state_granted": amx,
        # a non-AMX serve method's flags: role any has no serve method
        "cpu.cpu_runs_the_serve_method": "skipped",
        # docker's default seccomp refuses set_mempolicy (no CAP_SYS_NICE); one NUMA node: nothing to bind
        "cpu.numa_memory_policy_permitted": "skipped",
        # no GPU in CI: not applicable to role any
        "gpu.gpu_visible": "skipped",
        "gpu.gpu_compute_capability": "skipped",
        "gpu.gpu_driver_and_cuda_reported": "skipped",
        "gpu.torch_sees_gpu": "skipped",
        # no serve unit in this scenario
        "services.units_enabled_and_active": "skipped",
        "services.supervised_programs_running": "skipped",
        "services.health_endpoint_answers": "skipped",
    }, {n: checks[n]["message"] for n, s in status.items() if s != "passed"}
    assert rc == 0
    assert "kt-kernel 0.7.2 variant=" in checks["kt_kernel.kt_kernel_imports"]["output"]
    assert "NVIDIA GPU absent" in checks["gpu.gpu_visible"]["message"]
    assert (
        "set_mempolicy(MPOL_BIND, node 0) refused: Operation not permitted"
        in (checks["cpu.numa_memory_policy_permitted"]["message"])
    )


def test_doctor_fails_the_pins_of_a_wrong_env(host):
    """The SFT env given as the inference env: it lacks sglang-kt, so that env's pins fail (exit 1)."""
    # not -k envs: the container's name (roles1-envs) is in every check's id
    rc, checks = doctor(host, "--python", SFT, "--sft-python", SFT, "-k", "pins or sglang")
    assert rc == 1
    inference = checks["envs.env_matches_profile_pins[inference]"]
    assert inference["status"] == "failed"
    assert inference["message"].endswith("sglang-kt missing (profile pins ==0.7.2)"), inference["message"]
    assert checks["envs.env_matches_profile_pins[sft]"]["status"] == "passed"
    assert checks["envs.sglang_lists_kt_flags"]["status"] == "skipped"


def test_doctor_fails_an_env_that_does_not_satisfy_a_pin(host, tmp_path):
    """A site profile pinning kt-kernel 0.7.1: the installed 0.7.2 fails both envs' pins (exit 1)."""
    profile = yaml.safe_load((REPO / "ktinfra" / "data" / "profiles" / "kt-0.7.yaml").read_text())
    profile["name"] = "site-kt-kernel-071"
    for env in ("inference", "sft"):
        pins = profile["envs"][env]["packages"]
        pins[pins.index("kt-kernel==0.7.2")] = "kt-kernel==0.7.1"
    site = tmp_path / "site-kt-kernel-071.yaml"
    site.write_text(yaml.safe_dump(profile))
    rc, checks = doctor(host, "--python", INFER, "--sft-python", SFT, "--profile", str(site), "-k", "pins")
    assert rc == 1
    for env in ("inference", "sft"):
        check = checks[f"envs.env_matches_profile_pins[{env}]"]
        assert check["status"] == "failed", check
        assert check["message"].endswith("kt-kernel 0.7.2 does not satisfy ==0.7.1"), check["message"]
