"""`-k` with a check id as doctor reports it (services.health_endpoint_answers, envs.env_matches_profile_pins
[sft]), copied from the table, the --json or doctor's own 'no check matches ... (checks: cpu.amx_cpu_flags,
...)' list, matched no check: pytest matches -k against its own names (test_services.py,
test_health_endpoint_answers[local]), so doctor ended 'no check matches -k'. Each id is now written in those
names; the suite is run for real on this machine."""

from __future__ import annotations

import shutil

import pytest

from ktinfra import doctor


def _ran(select: str) -> list[tuple[str, str]]:
    report = doctor.run(["local://"], "any", "kt-0.7", select=select)
    return [(check.id, check.host) for check in report.checks]


def test_a_check_id_from_the_report_selects_that_check():
    assert _ran("services.health_endpoint_answers") == [("services.health_endpoint_answers", "local://")]


def test_a_check_id_with_its_parameters_selects_that_check_alone():
    assert _ran("envs.env_matches_profile_pins[sft]") == [("envs.env_matches_profile_pins[sft]", "local://")]


def test_check_ids_mix_with_other_words():
    ran = {check_id for check_id, _ in _ran("services and not services.health_endpoint_answers")}
    assert ran == {"services.units_enabled_and_active", "services.supervised_programs_running"}, ran


def test_words_that_are_no_check_id_go_to_pytest_as_they_are():
    ids = doctor.check_ids(doctor.suite_dir())
    for select in ("health", "cpu and not amx", "services.health", "cpu.amx_cpu_flags[", "x[y]"):
        assert doctor.pytest_select(select, ids) == select


def test_a_suite_file_that_does_not_parse_is_the_suite_run_s_error(tmp_path, monkeypatch):
    """-k reads the suite's check ids from its source before it runs: a file there that does not parse (a
    KTINFRA_INFRA_SUITE checkout mid-edit) must end in doctor's one error, not a SyntaxError traceback."""
    suite = tmp_path / "infra"
    shutil.copytree(doctor.suite_dir(), suite, ignore=shutil.ignore_patterns("__pycache__"))
    (suite / "test_broken.py").write_text("def test_x(:\n")
    monkeypatch.setenv(doctor.SUITE_ENV, str(suite))
    with pytest.raises(doctor.DoctorError, match=r"the suite did not run \(pytest exit 2\)"):
        doctor.run(["local://"], "any", "kt-0.7", select="services.health_endpoint_answers")
