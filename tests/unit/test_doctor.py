"""ktinfra doctor: input validation before anything runs, pytest arguments, and reading real suite results."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import doctor
from ktinfra.cli import app
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
    assert "--kt-profile=kt-0.4-autodl" in args
    # the health URL (a key in it) goes by the environment, not by an argv any user may read
    assert not any("http://h:1/health" in a for a in args)
    assert doctor._suite_env("http://h:1/health")[doctor.HEALTH_URL_ENV] == "http://h:1/health"
    assert doctor.HEALTH_URL_ENV not in doctor._suite_env(None)
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
    passed_and_error = doctor.DoctorReport(
        ["local://"],
        "any",
        "kt-0.7",
        [doctor.Check("x.y", "local", "passed"), doctor.Check("x.z", "local", "error")],
    )
    assert not passed_and_error.ok and not passed_and_error.to_dict()["ok"]
    assert passed_and_error.to_dict()["summary"] == {"passed": 1, "failed": 0, "error": 1, "skipped": 0}


def no_suite_run(monkeypatch):
    monkeypatch.setattr(doctor.subprocess, "run", lambda *a, **k: pytest.fail("suite must not start"))


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        ([], "no host given"),
        (["ssh://"], "ssh backend needs a host"),
        (["ssh://root@"], "ssh backend needs a host"),
        (["ssh://root@:2222"], "ssh backend needs a host"),
        (["local://", "docker://?sudo=true"], "docker backend needs a host"),
        (["paramiko://"], "paramiko backend needs a host"),
        (["kubectl://?namespace=kt"], "kubectl backend needs a host"),
        (["local:/"], "use BACKEND://HOST"),
    ],
)
def test_host_urls_without_a_host_are_refused(hosts, message, monkeypatch):
    no_suite_run(monkeypatch)
    with pytest.raises(doctor.DoctorError, match=message):
        doctor.run(hosts, "serve", "kt-0.7")


@pytest.mark.parametrize(
    "spec",
    [
        "local://",
        "ansible://",  # every inventory host
        "ansible://all?ansible_inventory=inventories/example/hosts",
        "ssh://root@gpu1:2222",
        "ssh://[fe80::1]:22",
        "docker://ktbox?sudo=true",
        "kubectl://kt-pod?namespace=kt",
    ],
)
def test_host_urls_testinfra_can_use_pass(spec):
    doctor.validate([spec], "serve", "kt-0.7")


def test_unknown_method_is_refused_before_the_suite_runs(monkeypatch):
    no_suite_run(monkeypatch)
    with pytest.raises(doctor.DoctorError, match="unknown --method 'BOGUS'.*AMXINT8"):
        doctor.run(["local://"], "serve", "kt-0.7", method="BOGUS")
    doctor.validate(["local://"], "serve", "kt-0.7", method="AMXINT4")
    doctor.validate(["local://"], "serve", "kt-0.7", method="bf16")  # the suite compares upper-cased


def test_bad_select_expression_is_refused_before_the_suite_runs(monkeypatch):
    no_suite_run(monkeypatch)
    with pytest.raises(doctor.DoctorError, match=r"bad -k expression 'cpu and'") as caught:
        doctor.run(["local://"], "serve", "kt-0.7", select="cpu and")
    assert "\n" not in str(caught.value)


def test_bad_select_caught_by_pytest_is_one_line(monkeypatch):
    """Where the up-front parse cannot run, pytest's exit 4 for a bad -k still gives one line, no dump: the
    suite is run for real, with only the up-front parse taken away."""
    monkeypatch.setattr(doctor, "validate_select", lambda expression: None)
    with pytest.raises(doctor.DoctorError) as caught:
        doctor.run(["local://"], "serve", "kt-0.7", select="x y")
    # pytest's own reason, the first line of its "ERROR: Wrong expression passed to '-k': ..."
    assert (
        str(caught.value)
        == "bad -k expression 'x y': x y: at column 3: expected end of input; got identifier"
    )


def test_select_matching_nothing_names_the_expression_and_some_checks():
    with pytest.raises(doctor.DoctorError) as caught:
        doctor.run(["local://"], "serve", "kt-0.7", select="nomatch")
    message = str(caught.value)
    assert message.startswith("no check matches -k 'nomatch' (checks: cpu.amx_cpu_flags, ")
    assert message.endswith(", ...)") and "\n" not in message and "deselected" not in message


def test_check_ids_come_from_the_suite_source():
    ids = doctor.check_ids(doctor.suite_dir())
    assert "cpu.amx_tile_state_granted" in ids and "services.health_endpoint_answers" in ids
    recorded = {c.id.split("[")[0] for c in doctor.parse_junit(RESULTS / "h100-serve.xml")}
    assert recorded <= set(ids)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hosts", ","], "error: no host given"),
        (["--hosts", "ssh://"], "error: bad host 'ssh://'"),
        (["--method", "BOGUS"], "error: unknown --method 'BOGUS'"),
        (["-k", "cpu and"], "error: bad -k expression 'cpu and'"),
    ],
)
def test_cli_bad_input_is_one_error_line(args, message, monkeypatch):
    from typer.testing import CliRunner

    from ktinfra.cli import app

    no_suite_run(monkeypatch)
    result = CliRunner().invoke(app, ["doctor", *args])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.output.startswith(message) and result.output.count("\n") == 1, result.output


def test_a_python_that_does_not_run_is_named_as_the_user_gave_it():
    """Before: 'inference env not installed: --kt-python /nonexist/python does not run', the suite's own
    option; the user typed `ktinfra doctor --python`. And it was a skip: doctor could exit 0 with the env the
    user named never checked; now it fails the checks that need it."""
    report = doctor.run(
        ["local://"],
        "any",
        python="/nonexist/python",
        sft_python="/no/py",
        select="test_sglang_lists_kt_flags",
    )
    assert [(c.status, c.message) for c in report.checks] == [
        (
            "failed",
            "inference env: python /nonexist/python does not run "
            "(ktinfra doctor --python, pytest --kt-python)",
        )
    ]
    assert not report.ok
    report = doctor.run(["local://"], "any", sft_python="/no/py", select="test_envs and sft")
    assert [(c.status, c.message) for c in report.checks] == [
        (
            "failed",
            "sft env: python /no/py does not run (ktinfra doctor --sft-python, pytest --kt-sft-python)",
        )
    ]


def test_cli_exits_1_when_a_named_python_does_not_run(tmp_path):
    broken = tmp_path / "env" / "bin" / "python"
    broken.parent.mkdir(parents=True)
    broken.write_text("#!/nonexistent-interpreter\n")
    broken.chmod(0o755)
    args = ["doctor", "--role", "any", "--sft-python", str(broken), "-k", "cpu or sft", "--json"]
    result = CliRunner().invoke(app, args)
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and not report["ok"], result.output
    assert [c["status"] for c in report["checks"] if "sft" in c["id"]] == ["failed"]
