"""What a check prints besides its last line (the units it passed over: 'not checked (unit file removed,
...): sglang-old.service', 'not asked (no unit file: ...): sglang.service (masked)') reached --json only:
the table's detail is the check's message or the last line it printed, so a passing units check showed
'units enabled and active: ...' and nothing of the units it left out. The human output lists those lines
under the table, each with its check and host. Run through `ktinfra doctor` on a stand-in suite (the real one
needs systemd) that prints as tests/infra/test_services.py does."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from ktinfra import doctor
from ktinfra.cli import app

REMOVED = (
    "not checked (unit file removed, the unit down; systemctl reset-failed clears it): sglang-old.service"
)
MASKED = "not asked (no unit file: the units check reports them): sglang-b.service (masked)"
SUITE = """
import pytest


def pytest_addoption(parser):
    for name in ("--kt-role", "--kt-profile"):
        parser.addoption(name)
"""
SERVICES = f"""
import pytest


@pytest.fixture(scope="module")
def units():
    print({REMOVED!r})
    return ["sglang.service"]


def test_units_enabled_and_active(host, units):
    print("units enabled and active: sglang.service")


def test_health_endpoint_answers(host, units):
    print({MASKED!r})
    pytest.skip("no serve unit to ask (passed over: sglang-b.service (masked))")


def test_unit_states(host):
    print("sglang.service: active")
"""


@pytest.fixture
def suite(tmp_path, monkeypatch):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "test_services.py").write_text(textwrap.dedent(SERVICES))
    monkeypatch.setenv(doctor.SUITE_ENV, str(tmp_path))


def test_the_human_report_lists_what_the_checks_printed_beside_their_detail(suite):
    res = CliRunner().invoke(app, ["doctor", "--role", "any"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    lines = [line.strip() for line in res.stdout.splitlines()]
    assert f"services.units_enabled_and_active (local): {REMOVED}" in lines, res.stdout
    assert f"services.health_endpoint_answers (local): {MASKED}" in lines, res.stdout
    assert "2 passed, 0 failed, 0 error, 1 skipped" in lines, res.stdout
    # a line already in the table is not repeated under it
    assert not any(line.startswith("services.unit_states (local):") for line in lines), res.stdout


def test_the_notes_are_in_json_as_before(suite):
    res = CliRunner().invoke(app, ["doctor", "--role", "any", "--json"])
    assert res.exit_code == 0, res.output
    checks = {c["id"]: c for c in json.loads(res.stdout)["checks"]}
    assert REMOVED in checks["services.units_enabled_and_active"]["output"]
    assert checks["services.health_endpoint_answers"]["output"] == MASKED
