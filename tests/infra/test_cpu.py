"""CPU: AMX present and usable by a process (the cause of KT's "Illegal instruction" reports)."""

import errno

import pytest
from kthost import AMX_FLAGS, parse_version, pool_nodes

from ktinfra.facts.cpu import ISA_FLAGS
from ktinfra.plan.formats import ISA_NEEDS


def _has_amx(cpu) -> bool:
    return all(cpu["amx_flags"].values())


def test_amx_cpu_flags(cpu, expect):
    missing = [f for f in AMX_FLAGS if not cpu["amx_flags"][f]]
    isa = "avx512f" if cpu["avx512f"] else "avx2" if cpu["avx2"] else "no avx2"
    expect.require(not missing, expect.needs_amx, "AMX", f"cpu lacks {', '.join(missing)}; best ISA {isa}")


def test_kernel_new_enough_for_amx(cpu, expect, profile):
    expect.require(_has_amx(cpu), expect.needs_amx, "AMX", "cpu has no AMX flags")
    minimum = profile.get("kernel_min", "5.16")
    if cpu["req_rc"] == 0 and cpu["xtiledata_granted"]:
        # the kernel granted tiles (test_amx_tile_state_granted): a distribution kernel's backport passes
        print(f"kernel {cpu['kernel']} grants AMX tiles (ARCH_REQ_XCOMP_PERM); profile minimum {minimum}")
        return
    assert parse_version(cpu["kernel"]) >= parse_version(minimum), (
        f"kernel {cpu['kernel']} < {minimum}: no arch_prctl(ARCH_REQ_XCOMP_PERM), AMX code dies with SIGILL"
    )


def test_amx_tile_state_granted(cpu, expect):
    expect.require(_has_amx(cpu), expect.needs_amx, "AMX", "cpu has no AMX flags")
    assert cpu["xtiledata_supported"], f"kernel does not offer XTILEDATA (supported mask {cpu['xcomp_supp']})"
    refused = f"{cpu['req_error']} (errno {cpu['req_errno']})"
    assert cpu["req_rc"] == 0, f"ARCH_REQ_XCOMP_PERM(XTILEDATA) refused: {refused}"
    assert cpu["xtiledata_granted"], f"ARCH_GET_XCOMP_PERM mask {cpu['xcomp_perm']} lacks XTILEDATA (bit 18)"


def test_cpu_runs_the_serve_method(cpu, expect):
    """The instruction sets kt-kernel's backend for the serve method needs (ktinfra.plan.formats.ISA_NEEDS:
    BF16 and FP8 avx512_bf16, RAWINT4 AVX-512, LLAMAFILE avx2). The AMX methods are the AMX checks above."""
    method = expect.method.upper()
    if expect.role != "serve" or method.startswith("AMX") or method not in ISA_NEEDS:
        pytest.skip(f"not applicable: role {expect.role!r}, method {method} (AMX methods: the AMX checks)")
    have = set(cpu.get("flags") or ())
    # ISA_NEEDS names flags as ktinfra facts does; /proc/cpuinfo spells some otherwise (avx512vbmi)
    missing = [flag for flag in ISA_NEEDS[method] if ISA_FLAGS.get(flag, flag) not in have]
    assert not missing, (
        f"--method {method} needs {', '.join(ISA_NEEDS[method])}; this CPU lacks {', '.join(missing)} "
        f"(its avx/amx flags: {' '.join(sorted(have)) or 'none'}): kt-kernel would die with SIGILL"
    )


def test_numa_memory_policy_permitted(cpu, expect):
    """kt-kernel gives each NUMA node a thread pool and binds that pool's expert weights to its node with
    set_mempolicy. A container under docker's or podman's default seccomp profile is refused it (EPERM)
    without CAP_SYS_NICE: kt-kernel prints 'set_mempolicy: Operation not permitted' and serves on, each pool
    then reading weights that may sit on the other node. On one pool there is nothing to bind."""
    if "mempolicy_rc" not in cpu:
        pytest.skip(f"not applicable: {cpu.get('mempolicy_error') or 'a probe without set_mempolicy'}")
    pools = pool_nodes(cpu)
    call = f"set_mempolicy(MPOL_BIND, node {cpu['mempolicy_node']})"
    if cpu["mempolicy_rc"] == 0:
        print(f"{call} permitted; {len(pools)} pool(s) {pools}")
        return
    refused = f"{call} refused: {cpu['mempolicy_error']}"
    if len(pools) < 2:
        pytest.skip(f"not applicable: one NUMA pool (node {pools[0]}), nothing to bind; {refused}")
    why = (
        f"{refused} on a host of {len(pools)} NUMA pools {pools}: kt-kernel cannot keep each pool's expert "
        "weights on its node. In a container: docker/podman run --cap-add SYS_NICE, Kubernetes "
        "securityContext.capabilities.add [SYS_NICE]"
        + (" (EPERM: a seccomp profile, docker's default)" if cpu["mempolicy_errno"] == errno.EPERM else "")
    )
    if not expect.needs_kt_kernel:
        pytest.skip(f"not applicable: role {expect.role!r} runs no kt-kernel; {why}")
    pytest.fail(why, pytrace=False)
