"""The host suite checks the instruction sets of a non-AMX serve method (BF16, FP8, RAWINT4, LLAMAFILE):
before, only the AMX methods' flags were checked, so a serve host whose CPU cannot run --method BF16 passed
doctor and kt-kernel died with SIGILL at the first forward. Run for real on this machine's CPU (on CI's,
AVX2 without AVX-512, LLAMAFILE passes and the other three fail)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktinfra import doctor

CHECK = "cpu_runs_the_serve_method"
FLAGS = set(Path("/proc/cpuinfo").read_text().split())


def _check(method: str, role: str = "serve"):
    report = doctor.run(["local://"], role, method=method, select=CHECK)
    [check] = report.checks
    return check


@pytest.mark.parametrize("method", ["BF16", "FP8", "RAWINT4", "LLAMAFILE"])
def test_the_serve_method_fails_exactly_when_this_cpu_lacks_its_flags(method):
    from ktinfra.facts.cpu import ISA_FLAGS
    from ktinfra.plan.formats import ISA_NEEDS

    missing = [flag for flag in ISA_NEEDS[method] if ISA_FLAGS.get(flag, flag) not in FLAGS]
    check = _check(method)
    assert check.status == ("failed" if missing else "passed"), (check.status, check.message)
    if missing:
        assert f"--method {method} needs" in check.message
        assert f"this CPU lacks {', '.join(missing)}" in check.message


@pytest.mark.parametrize(("method", "role"), [("AMXINT8", "serve"), ("BF16", "any"), ("BF16", "sft")])
def test_amx_methods_and_other_roles_are_not_applicable(method, role):
    assert _check(method, role).status == "skipped"


def test_flags_are_matched_as_proc_cpuinfo_spells_them():
    """The H200 host's Sapphire Rapids lists avx512vbmi; ISA_NEEDS (and ktinfra facts) say avx512_vbmi. The
    first version of the check compared the names as they are and failed FP8 there (device run of
    2026-11-30: 'lacks avx512_vbmi' with avx512vbmi in its flags)."""
    from ktinfra.facts.cpu import ISA_FLAGS
    from ktinfra.plan.formats import ISA_NEEDS

    spelled = {flag: ISA_FLAGS[flag] for needs in ISA_NEEDS.values() for flag in needs if flag in ISA_FLAGS}
    assert spelled["avx512_vbmi"] == "avx512vbmi"
    assert all(flag in ISA_FLAGS for needs in ISA_NEEDS.values() for flag in needs)
