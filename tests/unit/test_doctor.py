"""ktinfra doctor: input validation before anything runs, pytest arguments, and reading real suite results."""

from pathlib import Path

import pytest

from ktinfra import doctor
from ktinfra.profiles import UnknownProfileError

RESULTS = Path(__file__).parents[1] / "fixtures" / "doctor"


@pytest.mark.parametrize(
    ("hosts", "role", "profile", "error"),
    [
        (["local://"], "gpu-box", "kt-0.7", doctor.DoctorError),
        (["gpu1"], "serve", "kt-0.7", doctor.DoctorError),
        (["local://", "telnet://gpu1"], "serve", "kt-0.7", doctor.DoctorError),
        (["ssh://root@gpu1"], "sft", "kt-9", UnknownProfileError),
    ],
)
def test_bad_input_is_refused_before_the_suite_runs(hosts, role, profile, error, monkeypatch):
    monkeypatch.setattr(doctor.subprocess, "run", lambda *a, **k: pytest.fail("suite must not start"))
    with pytest.raises(error):
        doctor.run(hosts, role, profile)


def test_missing_suite_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv(doctor.SUITE_ENV, str(tmp_path))
    with pytest.raises(doctor.DoctorError, match="suite not found"):
        doctor.suite_dir()


def test_pytest_args_carry_role_profile_hosts_and_options(tmp_path):
    args = doctor.pytest_args(
        tmp_path,
        tmp_path / "j.xml",
        ["ssh://a", "docker://b"],
        "sft",
        "kt-0.4-autodl",
        {"select": "amx", "health_url": "http://h:1/health", "python": None},
    )
    assert "--hosts=ssh://a,docker://b" in args and "--kt-role=sft" in args
    assert "--kt-profile=kt-0.4-autodl" in args and "--kt-health-url=http://h:1/health" in args
    assert args[args.index("-k") + 1] == "amx"
    assert not any(a.startswith("--kt-python") for a in args)
    assert "junit_family=xunit1" in args  # record_property (per-host tag) needs xunit1


def test_h100_results_parse_into_checks():
    """Suite results recorded on the H100 + AMX device host (role serve)."""
    checks = {c.id: c for c in doctor.parse_junit(RESULTS / "h100-serve.xml")}
    assert len(checks) == 16 and {c.host for c in checks.values()} == {"local"}
    assert checks["cpu.amx_tile_state_granted"].status == "passed"
    assert checks["kt_kernel.amxint8_moe_matches_float_reference"].status == "passed"
    pins = checks["envs.env_matches_profile_pins[inference]"]
    assert pins.status == "failed" and "torch 2.11.0 does not satisfy ==2.9.1" in pins.message
    assert checks["services.units_enabled_and_active"].status == "skipped"
    assert "not systemd" in checks["services.units_enabled_and_active"].message


def test_report_fails_on_any_failure_and_on_nothing_checked():
    checks = doctor.parse_junit(RESULTS / "epyc-sft.xml")
    report = doctor.DoctorReport(hosts=["local://"], role="sft", profile="kt-0.7", checks=checks)
    data = report.to_dict()
    assert not report.ok and data["summary"]["failed"] >= 3
    amx = next(c for c in checks if c.id == "cpu.amx_cpu_flags")
    assert amx.status == "failed" and amx.message.startswith("AMX required for role 'sft' but absent")
    skipped_only = doctor.DoctorReport(
        ["local://"], "any", "kt-0.7", [doctor.Check("x.y", "local", "skipped")]
    )
    assert not skipped_only.ok
    passed = doctor.DoctorReport(["local://"], "any", "kt-0.7", [doctor.Check("x.y", "local", "passed")])
    assert passed.ok
