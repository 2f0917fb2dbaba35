"""`ktinfra doctor -k services` over docker:// as a user who is not root (docker://nobody@BOX) on a systemd
host whose /proc hides other users' processes (hidepid=2, as multi-user GPU servers mount it): /proc/1/comm
cannot be read there, and the service checks were errors quoting testinfra's CommandResult. systemd's own test
(sd_booted: /run/systemd/system is there) now tells that PID 1 is systemd, and the checks run."""

from __future__ import annotations

import pytest
from systemd_box import box_sh as sh
from systemd_box import doctor_checks, systemd_box

# remounting the container's own /proc: its pid namespace has its own proc instance, the host's is untouched
PROC_ARGS = ["--cap-add", "SYS_ADMIN", "--security-opt", "apparmor=unconfined", "--security-opt",
             "seccomp=unconfined"]  # fmt: skip


@pytest.fixture(scope="module")
def box():
    with systemd_box("doctor-hidepid", docker_args=PROC_ARGS) as name:
        sh(name, "mount -o remount,hidepid=2 /proc")
        yield name


def test_service_checks_run_where_pid_1_is_hidden(box):
    _, checks = doctor_checks(f"nobody@{box}", "-k", "services")
    assert checks["services.units_enabled_and_active"]["message"] == (
        "no unit matching ktinfra-serve* sglang* installed"
    ), checks
    supervised = checks["services.supervised_programs_running"]
    assert supervised["message"].startswith("PID 1 is systemd"), supervised
