"""kt_host_tuning: kt-tune.sh run for real on a directory standing in for /proc/sys, and the limits templates
and input checks run by real ansible on localhost (-c local), writing only into tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from role_play import ROLES, run_play

ROLE = ROLES / "kt_host_tuning"
# a name that /proc/sys does not have: a kt-tune.sh that ignored KT_TUNE_SYSCTL_ROOT could not touch the host
RANGE = "ktinfra_test.ip_local_port_range"


def tune(root: Path, *args: str) -> dict:
    env = dict(os.environ, KT_TUNE_SYSCTL_ROOT=str(root))
    out = subprocess.run(["sh", str(ROLE / "files" / "kt-tune.sh"), *args], capture_output=True, text=True,
                         env=env, check=True).stdout  # fmt: skip
    return json.loads(out)


def test_multi_value_sysctl_is_set_then_applied_with_valid_json(tmp_path):
    """Before: the kernel's tab-separated value never equalled "1024 65000", and the raw tab in "before" made
    the line invalid JSON (from_json failed: Invalid control character) after the value was written."""
    path = tmp_path / "ktinfra_test" / "ip_local_port_range"
    path.parent.mkdir()
    path.write_text("32768\t60999\n")  # what the kernel prints
    first = tune(tmp_path, "sysctl", RANGE, "1024 65000")
    assert first["status"] == "set" and first["before"] == "32768 60999", first
    path.write_text("1024\t65000\n")  # the kernel reads it back tab-separated
    again = tune(tmp_path, "sysctl", RANGE, "1024 65000")
    assert again == {"setting": RANGE, "wanted": "1024 65000", "before": "1024 65000", "status": "applied",
                     "reason": ""}  # fmt: skip


def test_single_value_sysctl_still_written_and_compared(tmp_path):
    path = tmp_path / "ktinfra_test" / "swappiness"
    path.parent.mkdir()
    path.write_text("60\n")
    assert tune(tmp_path, "sysctl", "ktinfra_test.swappiness", "10")["status"] == "set"
    assert path.read_text() == "10\n"
    assert tune(tmp_path, "sysctl", "ktinfra_test.swappiness", "10")["status"] == "applied"


def render(tmp: Path, cli: list[str]) -> tuple[int, str]:
    """The role's input check, then its two limits templates into tmp (the order of tasks/main.yml), with the
    role's vars (public: the drop-in's values are vars/main.yml's kt_host_tuning__manager_limits)."""
    include = {"name": "kt_host_tuning", "tasks_from": "validate", "public": True}
    tasks = [{"ansible.builtin.include_role": include}]
    for name in ("systemd-limits.conf.j2", "limits.conf.j2"):
        template = {"src": str(ROLE / "templates" / name), "dest": str(tmp / name[:-3]), "mode": "0644"}
        tasks.append({"ansible.builtin.template": template})
    defaults = {"kt_host_tuning_nofile": 1048576}
    return run_play(tmp, tasks, defaults, cli)


@pytest.mark.parametrize(
    ("memlock", "systemd", "limits"),
    [("infinity", "infinity", "unlimited"), ("unlimited", "infinity", "unlimited"), ("64", "65536", "64")],
)
def test_memlock_reaches_systemd_and_limits_d(tmp_path, memlock, systemd, limits):
    """Before: -e kt_host_tuning_memlock=infinity wrote DefaultLimitMEMLOCK=0 ('infinity' | int * 1024)."""
    rc, output = render(tmp_path, [f"kt_host_tuning_memlock={memlock}", "kt_host_tuning_shm_size=75%"])
    assert rc == 0, output[-3000:]
    manager = (tmp_path / "systemd-limits.conf").read_text()
    assert f"\nDefaultLimitMEMLOCK={systemd}\nDefaultLimitNOFILE=1048576\n" in manager, manager
    logins = (tmp_path / "limits.conf").read_text()
    assert f"*    hard memlock {limits}\n" in logins and "root soft nofile  1048576\n" in logins, logins


@pytest.mark.parametrize("shm", ["64G", "64g", "512m", "75%", "1073741824", ""])
def test_tmpfs_sizes_are_accepted(tmp_path, shm):
    rc, output = render(tmp_path, ["kt_host_tuning_memlock=unlimited", f"kt_host_tuning_shm_size={shm}"])
    assert rc == 0, output[-3000:]


@pytest.mark.parametrize(
    ("memlock", "shm", "named"),
    [("64G", "75%", "got 64G"), ("-1", "75%", "got -1"), ("unlimited", "64GB", "got 64GB"),
     ("unlimited", "%75", "got %75"), ("unlimited", "1.5G", "got 1.5G"), ("0", "75%", "got 0)"),
     ("63", "75%", "got 63)"), ("unlimited", "0", "got 0)"), ("unlimited", "0G", "got 0G"),
     ("unlimited", "0%", "got 0%")],
)  # fmt: skip
def test_bad_memlock_or_shm_size_is_refused_before_anything_is_written(tmp_path, memlock, shm, named):
    """Before: 64G gave DefaultLimitMEMLOCK=0, and size=64GB went into /etc/fstab (mount refuses it); memlock
    0 let nothing be locked, and size=0 (0G, 0%) is a /dev/shm without limit (tmpfs reads 0 as none)."""
    rc, output = render(tmp_path, [f"kt_host_tuning_memlock={memlock}", f"kt_host_tuning_shm_size={shm}"])
    assert rc != 0
    assert "kt_host_tuning_memlock must be unlimited, infinity or a number of KiB" in output, output[-3000:]
    assert named in output
    assert not (tmp_path / "systemd-limits.conf").exists() and not (tmp_path / "limits.conf").exists()


@pytest.mark.parametrize("nofile", ["0", "-1", "1023", "lots", "1e6"])
def test_a_nofile_below_1024_is_refused_before_anything_is_written(tmp_path, nofile):
    """Before: all passed, and 0 (also "lots" or "1e6", which | int makes 0) gave `* hard nofile 0` in
    limits.d: every login on the host fails (PAM, sshd and the shell cannot open a file)."""
    rc, output = render(tmp_path, ["kt_host_tuning_memlock=unlimited", f"kt_host_tuning_nofile={nofile}"])
    assert rc != 0
    assert "kt_host_tuning_nofile must be a number of open files, at least 1024 (" in output, output[-3000:]
    assert f"(got {nofile})" in output
    assert not (tmp_path / "systemd-limits.conf").exists() and not (tmp_path / "limits.conf").exists()


def test_a_nofile_of_1024_is_accepted(tmp_path):
    rc, output = render(tmp_path, ["kt_host_tuning_memlock=unlimited", "kt_host_tuning_nofile=1024"])
    assert rc == 0, output[-3000:]
    assert "*    hard nofile  1024\n" in (tmp_path / "limits.conf").read_text()


def test_a_nofile_above_the_hosts_nr_open_is_refused_unless_the_role_raises_it(tmp_path):
    """Before: any number passed; one above fs.nr_open went into limits.d, and pam_limits then refuses every
    login ("Could not set limit for 'nofile'")."""
    above = int(Path("/proc/sys/fs/nr_open").read_text()) + 1
    limits = ["kt_host_tuning_memlock=unlimited", f"kt_host_tuning_nofile={above}"]
    rc, output = render(tmp_path, limits)
    assert rc != 0
    refusal = f"kt_host_tuning_nofile {above} is above this host's fs.nr_open ({above - 1})"
    assert refusal in output, output[-3000:]
    assert not (tmp_path / "limits.conf").exists()
    rc, output = render(tmp_path, [*limits, json.dumps({"kt_host_tuning_sysctls": {"fs.nr_open": above}})])
    assert rc == 0, output[-3000:]
    assert f"*    hard nofile  {above}\n" in (tmp_path / "limits.conf").read_text()


SYSCTLS, REPORT = "kt_host_tuning_sysctls", "kt_host_tuning_report_file"


@pytest.mark.parametrize(
    ("sysctls", "named"),
    [({"vm.swappiness": None}, "vm.swappiness has no usable value (got null)"),
     ({"kernel.numa_balancing": False}, "kernel.numa_balancing has no usable value (got false)"),
     ({"vm.swappiness": ""}, "vm.swappiness has no usable value"),
     ({"vm.swappiness": [10]}, "vm.swappiness has no usable value (got [10])"),
     ({"vm.swappiness": "10\nkernel.panic = 1"}, "vm.swappiness has no usable value"),
     ({"vm swappiness": 10}, 'bad name "vm swappiness"'),
     ({"vm.swappiness=": 10}, 'bad name "vm.swappiness="')],
)  # fmt: skip
def test_a_sysctl_without_a_usable_value_is_refused_before_anything_is_written(tmp_path, sysctls, named):
    """Before: all passed validate.yml, and persist.yml wrote `vm.swappiness = None` (False, a second line)
    into /etc/sysctl.d before kt-tune.sh reported not_set: systemd-sysctl then fails at every boot."""
    rc, output = render(tmp_path, ["kt_host_tuning_memlock=unlimited", json.dumps({SYSCTLS: sysctls})])
    assert rc != 0
    assert "kt_host_tuning_sysctls: " in output and named in output, output[-3000:]
    assert "each name must be a sysctl" in output
    assert not (tmp_path / "limits.conf").exists()


def test_numbers_and_multi_value_sysctls_are_accepted(tmp_path):
    sysctls = {"vm.swappiness": 10, "net.ipv4.ip_local_port_range": "1024 65000", "net/ipv4/tcp_sack": "1"}
    rc, output = render(tmp_path, ["kt_host_tuning_memlock=unlimited", json.dumps({SYSCTLS: sysctls})])
    assert rc == 0, output[-3000:]


@pytest.mark.parametrize("report", ["tuning.json", "var/lib/ktinfra/tuning.json", "/var/lib/ktinfra/"])
def test_a_report_file_that_is_no_absolute_file_path_is_refused_first(tmp_path, report):
    """Before: accepted; the report is written last, so tasks/runtime.yml failed there (dirname "" or a
    directory) after every setting had been applied to the host."""
    rc, output = render(tmp_path, ["kt_host_tuning_memlock=unlimited", f"{REPORT}={report}"])
    assert rc != 0
    refusal = "kt_host_tuning_report_file must be an absolute file path, as /var/lib/ktinfra/tuning.json"
    assert f"{refusal} (got {report})" in output, output[-3000:]
    assert not (tmp_path / "limits.conf").exists()


SHM_TASK = "Persist the /dev/shm size"
DISTRO_FSTAB = (
    "# /etc/fstab: static file system information.\n"
    "UUID=0a1b2c3d / ext4 errors=remount-ro 0 1\n"
    "tmpfs /dev/shm tmpfs defaults 0 0\n"
    "UUID=4e5f6a7b /data xfs defaults,nofail 0 2\n"
)


def persist_shm(
    tmp: Path, fstab: Path, shm: str, container: bool, memory: dict | None = None
) -> tuple[int, str]:
    """The role's /dev/shm steps of tasks/persist.yml as written (read the fstab line, keep its options, write
    the line), with only the fstab they read and edit (kt_host_tuning__fstab) pointed at `fstab`: the host's
    is never touched. Only the last step alone wrote a `defaults,size=` line that the role never writes."""
    tasks = yaml.safe_load((ROLE / "tasks" / "persist.yml").read_text())
    first = next(i for i, t in enumerate(tasks) if t.get("name") == "Read the /dev/shm line of fstab")
    last = next(i for i, t in enumerate(tasks) if t.get("name") == SHM_TASK)
    facts = {"container": container} | ({"memory": memory} if memory else {})
    extra = {"kt_host_tuning_shm_size": shm, "kt_preflight_facts": facts, "kt_host_tuning__fstab": str(fstab)}
    role_vars = {"ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")}  # the size it persists
    return run_play(tmp, [role_vars, *tasks[first : last + 1]], extra)


def shm_lines(fstab: Path) -> list[str]:
    return [line for line in fstab.read_text().splitlines() if " /dev/shm " in f" {line} "]


def test_the_shm_size_replaces_the_distros_fstab_line_once(tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text(DISTRO_FSTAB)
    rc, output = persist_shm(tmp_path, fstab, "75%", container=False)
    assert rc == 0 and "changed=1" in output, output[-3000:]
    # the distro's options kept, nosuid,nodev added (a plain `defaults` clears them at each boot's remount)
    assert shm_lines(fstab) == ["tmpfs /dev/shm tmpfs defaults,nosuid,nodev,size=75% 0 0"], fstab.read_text()
    others = [line for line in DISTRO_FSTAB.splitlines() if "/dev/shm" not in line]
    assert [line for line in fstab.read_text().splitlines() if "/dev/shm" not in line] == others

    rc, output = persist_shm(tmp_path, fstab, "75%", container=False)  # idempotent
    assert rc == 0 and "changed=0" in output, output[-3000:]
    rc, output = persist_shm(tmp_path, fstab, "64G", container=False)  # a new size replaces, never adds
    assert rc == 0 and "changed=1" in output, output[-3000:]
    assert shm_lines(fstab) == ["tmpfs /dev/shm tmpfs defaults,nosuid,nodev,size=64G 0 0"], fstab.read_text()


@pytest.mark.parametrize(("shm", "container"), [("75%", True), ("", False)])
def test_a_container_or_an_empty_size_leaves_fstab_alone(tmp_path, shm, container):
    """A container's /dev/shm is the runtime's (docker --shm-size); an empty size means leave it."""
    fstab = tmp_path / "fstab"
    fstab.write_text(DISTRO_FSTAB)
    rc, output = persist_shm(tmp_path, fstab, shm, container=container)
    assert rc == 0 and "skipping" in output, output[-3000:]
    assert fstab.read_text() == DISTRO_FSTAB
