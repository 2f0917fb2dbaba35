"""`ktinfra doctor` over docker:// as a user who is not root (docker://nobody@BOX) against a container whose
PID 1 is not systemd, where /etc/ktinfra/serve is 0700 root's: the health check read the directory it may not
list as 'no env files' and was skipped ('no serve unit installed'), so doctor passed while the server was
down. It now fails, saying the directory cannot be read and to run doctor as root."""

from __future__ import annotations

import pytest
from systemd_box import doctor_checks, plain_box


@pytest.fixture(scope="module")
def box():
    setup = (
        "mkdir -p /etc/ktinfra/serve && chmod 700 /etc/ktinfra/serve && "
        "printf 'KT_HEALTH_URL=http://127.0.0.1:30123/health\\n' > /etc/ktinfra/serve/q.env"
    )
    with plain_box("doctor-serve-dir", setup) as name:
        yield name


def test_a_serve_dir_the_user_cannot_read_fails_the_health_check(box):
    returncode, checks = doctor_checks(f"nobody@{box}", "-k", "health")
    (check,) = checks.values()
    said = check["message"]
    assert check["status"] == "failed", check
    assert "cannot list the serve environment files in /etc/ktinfra/serve" in said, said
    assert "Permission denied" in said and "run doctor as root (sudo" in said, said
    assert returncode == 1
