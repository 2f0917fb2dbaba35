"""`ktinfra doctor --supervisor-dir` over docker:// against a container whose PID 1 is not systemd, with
kt_serve's supervisord layout under /srv/supervisor (kt_serve_supervisor_dir) and its venv at /srv/sup
(kt_serve_supervisor_venv): the supervised-programs check reads that directory and asks that venv's
supervisorctl (a stand-in printing `status`). Before, the check looked in /etc/ktinfra/supervisor only and
was skipped as 'not installed' whatever the programs' state."""

from __future__ import annotations

import pytest
from systemd_box import box_sh as sh
from systemd_box import doctor_checks, plain_box

CHECK = "services.supervised_programs_running"
PROGRAM = (
    "[program:ktinfra-serve-q]\\ncommand=/bin/sh -c true\\nautostart=true\\n\\n"
    "[eventlistener:ktinfra-start-limit-q]\\ncommand=/srv/sup/bin/python -c pass ktinfra-serve-q 3 600 x\\n"
)


def say(box: str, state: str) -> None:
    listener = "ktinfra-start-limit-q  RUNNING   pid 8, uptime 0:01:00"
    lines = f"'ktinfra-serve-q  {state}' '{listener}'"
    sh(box, f"printf '%s\\n' {lines} > /srv/status.txt")


@pytest.fixture(scope="module")
def box():
    setup = (
        "mkdir -p /srv/supervisor/conf.d /srv/sup/bin"
        " && echo '[supervisord]' > /srv/supervisor/supervisord.conf"
        f" && printf '{PROGRAM}' > /srv/supervisor/conf.d/ktinfra-serve-q.conf"
        " && printf '#!/bin/sh\\ncat /srv/status.txt\\n' > /srv/sup/bin/supervisorctl"
        " && chmod 755 /srv/sup/bin/supervisorctl"
    )
    with plain_box("doctor-supdir", setup) as name:
        yield name


def doctor(name: str, *args: str) -> tuple[int, tuple[str, str]]:
    returncode, checks = doctor_checks(name, "-k", "supervised", *args)
    return returncode, (checks[CHECK]["status"], checks[CHECK]["message"])


def test_the_supervisor_dir_given_is_checked(box):
    say(box, "FATAL     Exited too quickly (process log may have details)")
    rc, (status, message) = doctor(box)
    assert status == "skipped" and "--supervisor-dir" in message, message
    rc, (status, message) = doctor(box, "--supervisor-dir", "/srv/supervisor")
    assert rc == 1 and status == "failed" and "ktinfra-serve-q FATAL" in message, message
    say(box, "RUNNING   pid 9, uptime 0:01:00")
    rc, (status, message) = doctor(box, "--supervisor-dir", "/srv/supervisor")
    assert rc == 0 and status == "passed", message
