"""`ktinfra doctor` against a host where no command runs: the suite itself (tests/infra) over ssh to a closed
port, run for real."""

from __future__ import annotations

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
        ("cpu.amx_cpu_flags", "ssh://127.0.0.1"),
        ("envs.env_matches_profile_pins[inference]", "ssh://127.0.0.1"),
        ("envs.env_matches_profile_pins[sft]", "ssh://127.0.0.1"),
    ]
    for check in report.checks:
        assert check.status == "error"
        assert check.message.startswith("cannot run commands on ssh://127.0.0.1: ssh: connect to host"), check
        assert "CommandResult" not in check.message
    assert not report.ok
