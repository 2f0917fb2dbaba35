"""kt_host_tuning: the /dev/shm line it writes into fstab, and the mount options that line carries.

systemd mounts /dev/shm nosuid,nodev (docker adds noexec), and at every boot systemd-remount-fs remounts it
with its fstab options (`mount -o remount /dev/shm` reads fstab; kt-tune.sh's remount does the same once the
line exists). The role wrote `defaults,size=75%`: remounted with it, /dev/shm lost nosuid,nodev,noexec (shown
in the debian12 container: rw,nosuid,nodev,noexec -> rw), and a CIS-hardened line's noexec was replaced. Now
an existing line's options are kept with size= replaced, and without one systemd's nosuid,nodev is written.
The play is persist.yml's /dev/shm steps as written, with only the fstab they read and edit in tmp_path.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from role_play import ROLES, run_play

ROLE = ROLES / "kt_host_tuning"
DEBIAN_FSTAB = "# /etc/fstab: static file system information.\nUUID=1a2b / ext4 errors=remount-ro 0 1\n"


def persist_shm(tmp: Path, fstab: Path, shm: str) -> tuple[int, str]:
    tasks = yaml.safe_load((ROLE / "tasks" / "persist.yml").read_text())
    steps = [t for t in tasks if "/dev/shm" in t["name"] or "fstab" in t["name"]]
    for step in steps:
        if "ansible.posix.mount" in step:
            step["ansible.posix.mount"]["fstab"] = str(fstab)
    extra = {"kt_host_tuning_shm_size": shm, "kt_preflight_facts": {"container": False},
             "kt_host_tuning__fstab": str(fstab)}  # fmt: skip
    role_vars = {"ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")}  # the size it persists
    return run_play(tmp, [role_vars, *steps], extra)


def shm_lines(fstab: Path) -> list[str]:
    return [line for line in fstab.read_text().splitlines() if " /dev/shm " in f" {line} "]


def test_without_a_dev_shm_line_the_new_one_keeps_nosuid_nodev(tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text(DEBIAN_FSTAB)
    rc, output = persist_shm(tmp_path, fstab, "75%")
    assert rc == 0, output[-3000:]
    assert shm_lines(fstab) == ["tmpfs /dev/shm tmpfs nosuid,nodev,size=75% 0 0"], fstab.read_text()
    rc, output = persist_shm(tmp_path, fstab, "75%")
    assert rc == 0 and "changed=0" in output, output[-3000:]


def test_a_hardened_line_keeps_its_options_and_only_the_size_changes(tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text(DEBIAN_FSTAB + "tmpfs /dev/shm tmpfs defaults,nodev,nosuid,noexec,size=8G 0 0\n")
    rc, output = persist_shm(tmp_path, fstab, "75%")
    assert rc == 0 and "changed=1" in output, output[-3000:]
    assert shm_lines(fstab) == ["tmpfs /dev/shm tmpfs defaults,nodev,nosuid,noexec,size=75% 0 0"], (
        fstab.read_text()
    )
    rc, output = persist_shm(tmp_path, fstab, "75%")
    assert rc == 0 and "changed=0" in output, output[-3000:]


def test_a_plain_defaults_line_and_the_roles_old_line_get_nosuid_nodev(tmp_path):
    """`defaults` clears nosuid,nodev on remount as well: the line this role wrote before (and a distro's
    plain `defaults` line) is given them, once."""
    fstab = tmp_path / "fstab"
    fstab.write_text(DEBIAN_FSTAB + "tmpfs /dev/shm tmpfs defaults,size=75% 0 0\n")
    rc, output = persist_shm(tmp_path, fstab, "75%")
    assert rc == 0 and "changed=1" in output, output[-3000:]
    assert shm_lines(fstab) == ["tmpfs /dev/shm tmpfs defaults,nosuid,nodev,size=75% 0 0"], fstab.read_text()
    rc, output = persist_shm(tmp_path, fstab, "75%")
    assert rc == 0 and "changed=0" in output, output[-3000:]
