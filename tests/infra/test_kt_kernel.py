"""kt-kernel: imports, loads the CPU variant the host supports, and computes a correct AMXINT8 MoE forward."""

import json

import pytest
from kthost import planned_kt_variant, pool_nodes, run_probe

from ktinfra.plan.formats import CPU_VARIANT_ENV

# Routing shuffled between tokens must be far off: proves the tolerance can tell a wrong answer.
WRONG_ANSWER_MIN_ERR = 0.5


@pytest.fixture(scope="module")
def moe_forward(host, kt_python, kt_info, cpu, expect):
    has_amx = all(cpu["amx_flags"].values())
    expect.require(has_amx, expect.needs_amx, "AMX", "cpu has no AMX flags: AMXINT8 cannot run")
    if not kt_info.get("has_amxint8"):
        pytest.fail(f"kt-kernel {kt_info.get('version')} ({kt_info.get('variant')}) has no AMXInt8_MOE")
    args = {"mode": "forward", "threads": cpu["physical_cores"], "numa_nodes": pool_nodes(cpu)}
    return run_probe(host, kt_python, "kt_kernel_moe", json.dumps(args))


def test_kt_kernel_imports(kt_info, kt_python):
    assert "import_error" not in kt_info, f"{kt_python}: {kt_info.get('import_error')}"
    print(f"kt-kernel {kt_info['version']} variant={kt_info['variant']} ext={kt_info['ext_file']}")


def test_kt_kernel_loads_best_variant(host, kt_python, kt_info, cpu):
    """The library kt-kernel loads is the best this host runs. Where the kernel cannot grant AMX tiles
    (< 5.16) the planner forces a non-AMX library with KT_KERNEL_CPU_VARIANT in the serve env file, since
    kt-kernel itself picks amx from the CPU flags alone: the check then loads kt-kernel as the instance does
    and expects that library (it used to expect amx there, the library that faults on the first tile)."""
    assert "import_error" not in kt_info, kt_info.get("import_error")
    expected, forced = planned_kt_variant(cpu)
    info = kt_info
    if forced:
        env = {CPU_VARIANT_ENV: expected}
        info = run_probe(host, kt_python, "kt_kernel_moe", json.dumps({"mode": "info"}), env=env)
        assert "import_error" not in info, f"{CPU_VARIANT_ENV}={expected}: {info.get('import_error')}"
    assert info["variant"] == expected, (
        f"kt-kernel loaded {info['variant']!r}, this host runs {expected!r} "
        + (
            f"(forced by the plan: {forced})"
            if forced
            else "(KT_KERNEL_CPU_VARIANT set, or a single-variant build?)"
        )
    )
    print(f"kt-kernel variant {info['variant']} (host best: {expected}{'; ' + forced if forced else ''})")


def test_cpuinfer_builds_with_threadpool_per_numa_node(moe_forward, cpu):
    """The threads CPUInfer really started, read from /proc by the probe: one worker per requested thread
    plus kt-kernel's own (0.7.2 on the H200 host: 14 -> 15, 4 -> 5, 2 pools of 4 -> 9), and CPU affinity
    that reaches every NUMA node a pool was asked for."""
    fwd = moe_forward["forward"]
    threads, nodes = cpu["physical_cores"], pool_nodes(cpu)
    assert threads <= fwd["threads_started"] <= threads + len(nodes), (
        f"CPUInfer asked for {threads} worker threads on NUMA nodes {nodes} started {fwd['threads_started']}"
    )
    missing = sorted(set(nodes) - set(fwd["allowed_nodes"]))
    assert not missing, (
        f"no CPUInfer thread may run on NUMA node(s) {missing} (allowed: {fwd['allowed_nodes']})"
    )
    assert fwd["cases"], "CPUInfer ran no MoE task"


def test_amxint8_moe_matches_float_reference(moe_forward, pytestconfig):
    tolerance = pytestconfig.getoption("kt_moe_tolerance")
    fwd = moe_forward["forward"]
    assert fwd["cases"], "CPUInfer ran no MoE task: nothing was compared"  # else the loop checks nothing
    for case in fwd["cases"]:
        assert case["all_finite"], f"qlen {case['qlen']}: output has NaN/Inf or unwritten elements"
        assert case["rel_err"] <= tolerance, (
            f"qlen {case['qlen']}: |amx - fp32| / |fp32| = {case['rel_err']:.4f} > {tolerance} {fwd['shape']}"
        )
        assert case["wrong_routing_rel_err"] >= WRONG_ANSWER_MIN_ERR, (
            f"qlen {case['qlen']}: a wrongly routed reference is within {case['wrong_routing_rel_err']:.3f}: "
            "the comparison cannot tell right from wrong"
        )
    errs = ", ".join(f"qlen {c['qlen']}: {c['rel_err']:.4f}" for c in fwd["cases"])
    print(f"AMXINT8 vs fp32 rel L2 error (tolerance {tolerance}): {errs}; {fwd['seconds']} s")
