"""Review session 37 of `ktinfra facts`: input shapes the parser read wrongly before."""

from __future__ import annotations

import shutil
from pathlib import Path

from ktinfra.facts import from_capture

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"

# `df -B1 --output=source,fstype,size,used,avail,target` (GNU coreutils 9.1) on the development VM, with a
# tmpfs mounted as `mount -t tmpfs "my src" "/tmp/s37 a b"`: df prints the source and the target as they are.
DF_REAL_SPACES = """\
Filesystem              Type        1B-blocks        Used       Avail Mounted on
/dev/vda                ext4     270553174016 25319325696 83624968192 /
my src                  tmpfs     12638031872           0 12638031872 /tmp/s37 a b
tmpfs                   tmpfs     25276063744           0 25276063744 /dev/shm
"""


def _capture(tmp_path: Path, **files: str) -> Path:
    capture = tmp_path / "cap"
    shutil.copytree(HOSTS / "epyc-2c-nogpu", capture)
    for name, text in files.items():
        (capture / name.replace("_", "-").replace("-txt", ".txt")).write_text(text)
    return capture


def test_a_source_with_spaces_keeps_its_df_row(tmp_path):
    """Before: df rows were split on whitespace, so a row whose source has a space (a CIFS share
    `//nas/model store`, an sshfs `user@host:/my models`) had a word where the numbers belong and was
    dropped: the model disk was missing from `disks`."""
    df = DF_REAL_SPACES + (
        "//nas/model store       cifs    4000000000000 1000000000000 3000000000000 /mnt/model store\n"
        "me@nas:/my models       fuse.sshfs 2000000000000 0 2000000000000 /srv/ssh models\n"
    )
    facts = from_capture(_capture(tmp_path, df_txt=df))
    disks = {disk["mount"]: disk for disk in facts["disks"]}
    assert sorted(disks) == ["/", "/mnt/model store", "/srv/ssh models"]
    assert disks["/mnt/model store"]["source"] == "//nas/model store"
    assert disks["/mnt/model store"]["fstype"] == "cifs"
    assert disks["/mnt/model store"]["avail_bytes"] == 3_000_000_000_000
    assert disks["/srv/ssh models"]["source"] == "me@nas:/my models"
    assert disks["/"]["avail_bytes"] == 83624968192
    assert facts["shm_bytes"] == 25276063744


def test_df_rows_that_are_not_rows_are_still_skipped(tmp_path):
    df = (
        "Filesystem Type 1B-blocks Used Avail Mounted on\n"
        "/dev/vda ext4 1000 400 -20 /\n"  # GNU df's negative Avail: nothing free
        "/dev/vdb ext4 - - - /nosize\n"  # df could not read the sizes
        "/dev/vdc ext4 1000 400\n"  # cut short
        "/dev/vdd ext4 1000 400 600 /trailing space \n"
    )
    disks = {disk["mount"]: disk for disk in from_capture(_capture(tmp_path, df_txt=df))["disks"]}
    assert sorted(disks) == ["/", "/trailing space "]
    assert disks["/"]["avail_bytes"] == 0


def test_a_development_glibc_is_its_major_minor(tmp_path):
    """Before: `ldd (GNU libc) 2.40.9000` (a Fedora Rawhide development build) was read as glibc "40.9000"."""
    facts = from_capture(_capture(tmp_path, ldd_txt="ldd (GNU libc) 2.40.9000\nCopyright (C) 2024\n"))
    assert (facts["os"]["glibc"], facts["os"]["glibc_source"]) == ("2.40", "ldd")
    facts = from_capture(_capture(tmp_path / "b", ldd_txt="ldd (Ubuntu GLIBC 2.39-0ubuntu8.3) 2.39\n"))
    assert facts["os"]["glibc"] == "2.39"
