"""`ktinfra doctor` reads each --hosts entry as the suite's testinfra will, before the suite runs (real
ansible-inventory over the example inventory, real testinfra backends), and reads the suite's output whatever
this process's output encoding is."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import doctor
from ktinfra.cli import app

INVENTORY = Path(__file__).parents[2] / "inventories" / "example" / "hosts"


@pytest.fixture
def no_suite_run(monkeypatch):
    monkeypatch.setattr(doctor.subprocess, "run", lambda *a, **k: pytest.fail("suite must not start"))


def test_an_ansible_pattern_matching_no_host_is_refused(no_suite_run):
    """Before: left out without a word; beside local:// doctor checked local:// alone and could exit 0."""
    spec = f"ansible://nosuchgroup?ansible_inventory={INVENTORY}"
    with pytest.raises(doctor.DoctorError) as caught:
        doctor.run(["local://", spec], "any", "kt-0.7", select="health")
    assert str(caught.value) == f"bad host {spec!r}: matches no host of the inventory ({INVENTORY})"


def test_an_ansible_pattern_that_matches_hosts_is_accepted():
    doctor.resolve_hosts([f"ansible://kt_serve?ansible_inventory={INVENTORY}", "local://", "ssh://root@gpu1"])


def test_an_inventory_ansible_cannot_read_is_one_error_line(tmp_path, monkeypatch):
    """Before: pytest exit 3 and a 20-line INTERNALERROR dump from the suite's conftest."""
    monkeypatch.setattr(doctor.subprocess, "run", lambda *a, **k: pytest.fail("suite must not start"))
    spec = f"ansible://all?ansible_inventory={tmp_path / 'missing'}"
    result = CliRunner().invoke(app, ["doctor", "--hosts", spec, "--json"])
    assert result.exit_code == 1 and result.stdout == "", result.output
    assert result.stderr.startswith(f"error: bad host {spec!r}: No inventory was parsed")
    assert result.stderr.count("\n") == 1 and "INTERNALERROR" not in result.stderr


@pytest.mark.parametrize(("backend", "module"), [("paramiko", "paramiko"), ("winrm", "winrm")])
def test_a_backend_whose_package_is_missing_is_named_with_the_password_masked(backend, module, no_suite_run):
    assert importlib.util.find_spec(module) is None, f"{module} is installed here: this test needs it absent"
    with pytest.raises(doctor.DoctorError) as caught:
        doctor.run([f"{backend}://kt:s3cret@127.0.0.1:1"], "any", "kt-0.7")
    message = str(caught.value)
    assert message.startswith(f"bad host '{backend}://kt:***@127.0.0.1:1': You must install ")
    assert "s3cret" not in message and "\n" not in message


def test_suite_output_is_read_whatever_this_process_encodes_with(monkeypatch):
    """Before: with PYTHONIOENCODING=latin-1 (or any locale not UTF-8) the suite wrote its failure text in
    that encoding and doctor read it as UTF-8: a UnicodeDecodeError traceback for a python path with é."""
    monkeypatch.setenv("PYTHONIOENCODING", "latin-1")
    python = "/home/josé/env/bin/python"
    report = doctor.run(["local://"], "any", "kt-0.7", python=python, select="sglang")
    given = "(ktinfra doctor --python, pytest --kt-python)"
    assert [(c.status, c.message) for c in report.checks] == [
        ("failed", f"inference env: python {python} does not run {given}")
    ]
    assert json.loads(json.dumps(report.to_dict()))["checks"][0]["message"].startswith("inference env")
