"""Rules of the KT host suite (tests/infra): role expectations, kt-kernel variant ladder, pins, probes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

INFRA = Path(__file__).parents[1] / "infra"
HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
sys.path.insert(0, str(INFRA))

import kthost  # noqa: E402
from test_envs import pin_problems  # noqa: E402


def cpuinfo_flags(host: str) -> set[str]:
    for line in (HOSTS / host / "cpuinfo.txt").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    raise AssertionError(f"no flags line in {host}")


@pytest.mark.parametrize(
    ("host", "variant"),
    [("h100-xeon-amx-16c", "amx"), ("2xh200-xeon-amx-32c", "amx"), ("epyc-2c-nogpu", "avx2")],
)
def test_expected_kt_variant_on_real_captures(host, variant):
    assert kthost.expected_kt_variant(cpuinfo_flags(host)) == variant


def test_expected_kt_variant_ladder_without_amx():
    base = {"avx2", "avx512f", "avx512bw"}
    assert kthost.expected_kt_variant(base) == "avx512_base"
    assert kthost.expected_kt_variant(base | {"avx512_vnni"}) == "avx512_vnni"
    assert kthost.expected_kt_variant(base | {"avx512_vnni", "avx512vbmi", "avx512_bf16"}) == "avx512_bf16"


@pytest.mark.parametrize(
    ("role", "method", "gpu", "amx", "kt"),
    [
        ("serve", "AMXINT8", True, True, True),
        ("serve", "LLAMAFILE", True, False, True),
        ("sft", "AMXINT8", True, True, True),
        ("any", "AMXINT8", False, False, False),
    ],
)
def test_role_expectations(role, method, gpu, amx, kt):
    expect = kthost.Expect(role, method)
    assert (expect.needs_gpu, expect.needs_amx, expect.needs_kt_kernel) == (gpu, amx, kt)


def test_require_fails_when_needed_and_skips_otherwise():
    expect = kthost.Expect("sft")
    with pytest.raises(pytest.fail.Exception, match="required for role 'sft'"):
        expect.require(False, expect.needs_amx, "AMX", "no flags")
    with pytest.raises(pytest.skip.Exception, match="not applicable"):
        kthost.Expect("any").require(False, False, "AMX", "no flags")
    expect.require(True, True, "AMX", "unused")  # present: no exception


def test_pin_problems_names_missing_and_mismatched():
    got = {"kt-kernel": "0.7.2", "torch": "2.11.0+cu130", "sglang-kt": None}
    problems = pin_problems(["kt-kernel==0.7.2", "sglang-kt==0.7.2", "torch==2.9.1"], got)
    assert problems == [
        "sglang-kt missing (profile pins ==0.7.2)",
        "torch 2.11.0+cu130 does not satisfy ==2.9.1",
    ]
    assert pin_problems(["ktransformers[sft]==0.7.2"], {"ktransformers": "0.7.2"}) == []


def test_kernel_version_parse():
    assert kthost.parse_version("6.18.44-fc-v657-gpu") >= kthost.parse_version("5.16")
    assert kthost.parse_version("5.15.0-91-generic") < kthost.parse_version("5.16")


def test_cpu_probe_runs_as_shipped_to_targets():
    """The probe goes over the wire as `python3 -c <base64>`: run exactly that command here."""
    cmd = kthost.probe_command(sys.executable, "cpu")
    out = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    flags = cpuinfo_flags_live()
    assert result["amx_flags"]["amx_tile"] == ("amx_tile" in flags)
    assert result["physical_cores"] >= 1 and result["usable_cpus"]
    if "amx_tile" not in flags:  # this machine: the kernel must refuse XTILEDATA
        assert result["req_rc"] != 0 and not result["xtiledata_granted"]


def cpuinfo_flags_live() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()
