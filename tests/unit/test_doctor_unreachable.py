"""`ktinfra doctor` against a host where no command runs: the suite itself (tests/infra) over ssh to a closed
port, run for real."""

from __future__ import annotations

import json
import shutil

import pytest

from ktinfra import doctor


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the ssh client")
def test_an_unreachable_host_fails_every_check_with_ssh_s_reason():
    # Each check quoted testinfra's CommandResult repr; the probe checks (cpu.*) showed only the start of
    # their base64 source, cut before ssh's message. Parametrized checks lost their host when a module
    # fixture failed: 'envs.env_matches_profile_pins' on host 'ssh://127.0.0.1-inference'.
    report = doctor.run(["ssh://127.0.0.1:1"], "serve", "kt-0.7", select="amx_cpu_flags or env_matches")
    ids = sorted((c.id, c.host) for c in report.checks)
    assert ids == [
        ("cpu.amx_cpu_flags", "ssh://127.0.0.1:1"),
        ("envs.env_matches_profile_pins[inference]", "ssh://127.0.0.1:1"),
        ("envs.env_matches_profile_pins[sft]", "ssh://127.0.0.1:1"),
    ]
    for check in report.checks:
        assert check.status == "error"
        assert check.message.startswith("cannot run commands on ssh://127.0.0.1:1: ssh: connect to host"), (
            check
        )
        assert "CommandResult" not in check.message
    assert not report.ok


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the ssh client")
def test_each_check_names_its_host_as_given_with_user_and_port_and_no_password():
    """testinfra's ids are BACKEND://NAME: both hosts were 'ssh://127.0.0.1', the ids got pytest's _0/_1
    suffixes (cpu.amx_cpu_flags[_0]), and user and port were gone."""
    hosts = ["ssh://127.0.0.1:1", "ssh://kt:s3cret@127.0.0.1:2"]
    report = doctor.run(hosts, "any", "kt-0.7", select="amx_cpu_flags or env_matches")
    assert sorted((c.id, c.host) for c in report.checks) == sorted(
        (check, host)
        for check in ("cpu.amx_cpu_flags", "envs.env_matches_profile_pins[inference]",
                      "envs.env_matches_profile_pins[sft]")
        for host in ("ssh://127.0.0.1:1", "ssh://kt:***@127.0.0.1:2")
    )  # fmt: skip
    for check in report.checks:
        assert check.status == "error" and check.message.startswith(f"cannot run commands on {check.host}: ")
    assert report.hosts == ["ssh://127.0.0.1:1", "ssh://kt:***@127.0.0.1:2"]
    assert "s3cret" not in json.dumps(report.to_dict())


def test_a_password_is_masked_in_bad_host_errors():
    with pytest.raises(doctor.DoctorError) as caught:
        doctor.validate_host("ssh://kt:s3cret@gpu1:99999")
    assert "s3cret" not in str(caught.value) and "ssh://kt:***@gpu1:99999" in str(caught.value)
    assert doctor.mask_password("ssh://kt:p@ss@gpu1:22?sudo=true") == "ssh://kt:***@gpu1:22?sudo=true"
    assert doctor.mask_password("ssh://kt@gpu1") == "ssh://kt@gpu1"


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the ssh client")
def test_the_table_does_not_call_failed_checks_unchecked():
    """Every check errored; the summary said "nothing was checked: no check passed", as if all skipped."""
    from typer.testing import CliRunner

    from ktinfra.cli import app

    res = CliRunner().invoke(app, ["doctor", "--hosts", "ssh://127.0.0.1:1", "-k", "amx_cpu_flags"])
    assert res.exit_code == 1
    assert "0 passed, 0 failed, 1 error, 0 skipped" in res.stdout
    assert "nothing was checked" not in res.stdout
