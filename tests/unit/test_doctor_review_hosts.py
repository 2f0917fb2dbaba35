"""`ktinfra doctor --hosts` with a password holding a URL delimiter ('/', '?', '#') as it is: the real CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ktinfra import doctor


def doctor_cli(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ktinfra", "doctor", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("ssh://kt:Se?cret9@127.0.0.1:1", "ssh://kt:***@127.0.0.1:1"),
        ("ssh://kt:Pa#ss9@127.0.0.1:1?sudo=true", "ssh://kt:***@127.0.0.1:1?sudo=true"),
        ("paramiko://kt:Sl/ash9@127.0.0.1:1", "paramiko://kt:***@127.0.0.1:1"),
    ],
)
def test_a_raw_delimiter_in_a_password_is_refused_without_showing_it(given, shown):
    """urllib ends the host part at the delimiter: 'ssh://kt:Se?cret9@h' was refused as "port 'Se' is not a
    number" with the whole password in the error, and 'Pa#ss9' ran ssh with port 'Pa' and printed
    ssh's "Bad port 'Pa'" as every check's message."""
    done = doctor_cli("--hosts", given, "--role", "any", "-k", "amx_cpu_flags", "--json")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        f"error: bad host {shown!r}: a '/', '?' or '#' in a password ends the host part of a URL; write it "
        "as %2F, %3F, %23 (testinfra decodes them)"
    )
    password = given.split(":")[2].rpartition("@")[0]
    assert password[:2] not in done.stderr


@pytest.mark.parametrize(
    "spec",
    [
        "ssh://gpu1:22?ssh_config=/home/a@b/config",  # an @ in a query value after HOST:PORT
        "kubectl://pod?context=kubernetes-admin@kubernetes",
        "ssh://kt:p@ss@gpu1:22?sudo=true",
        "ssh://kt:pa%23ss@gpu1",  # the encoded form the error asks for
    ],
)
def test_urls_without_a_raw_delimiter_in_a_password_are_not_refused_for_it(spec):
    doctor.validate_host(spec)


def test_an_ansible_pattern_with_a_colon_is_no_password():
    """ansible://web:db is an Ansible pattern (":" joins groups); an inventory path with an @ after it is
    no password, and ansible:// is read as before (here: the inventory is not there)."""
    spec = "ansible://web:db?ansible_inventory=/nonexistent/team@site/hosts"
    doctor.validate_host(spec)
    done = doctor_cli("--hosts", spec, "--role", "any", "-k", "amx_cpu_flags", "--json")
    assert done.returncode == 1 and "a password ends" not in done.stderr, done
    assert done.stderr.startswith(f"error: bad host {spec!r}: "), done
