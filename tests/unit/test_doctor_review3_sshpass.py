"""--hosts ssh://USER:PASSWORD@HOST: testinfra's ssh backend runs `sshpass -p PASSWORD ssh ...`, and on a
controller without sshpass every check was an error 'cannot run commands on ssh://kt:***@h: /bin/sh: 1:
sshpass: not found', which says neither what to install nor that a key works without it. Real suite run;
PATH here holds no sshpass."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ktinfra import doctor


@pytest.fixture
def no_sshpass(monkeypatch):
    """This PATH without any folder that holds sshpass."""
    kept = [d for d in os.environ["PATH"].split(os.pathsep) if not os.path.exists(os.path.join(d, "sshpass"))]
    monkeypatch.setenv("PATH", os.pathsep.join(kept))
    assert shutil.which("sshpass") is None


def test_a_password_without_sshpass_says_what_to_do(no_sshpass):
    report = doctor.run(["ssh://kt:Pa55wordXY@nonexistent.invalid"], role="any", select="amx_cpu_flags")
    [check] = report.checks
    assert check.status == "error", check
    assert check.message.startswith("cannot run commands on ssh://kt:***@nonexistent.invalid: "), check
    assert "sshpass: not found (a password in an ssh:// URL goes to sshpass on the controller: apt install " \
        "sshpass; or log in with a key (ssh-copy-id), no password in the URL)" in check.message  # fmt: skip
    assert "Pa55wordXY" not in json.dumps(report.to_dict())


def test_a_key_login_gets_ssh_s_own_message(no_sshpass):
    report = doctor.run(["ssh://kt@nonexistent.invalid"], role="any", select="amx_cpu_flags")
    [check] = report.checks
    assert check.status == "error" and "sshpass" not in check.message, check
