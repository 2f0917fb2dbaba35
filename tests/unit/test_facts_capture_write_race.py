"""`ktinfra facts --capture`: a link that appears where a capture file is written, after the checks.

The files were written by path (Path.write_text, then chmod 0644), which follows a link: one planted at
<staging>/lscpu.txt had the capture's text written into the file it points to, and that file made
world-readable. Moving the files into an empty folder checked the name was free, then rename(2) replaced
whatever had appeared there since. Files are now created with O_CREAT|O_EXCL|O_NOFOLLOW in the open staging
folder (fchmod on the open file) and moved with link(2), which refuses a taken name: the capture stops with
"appeared while the capture was written" and leaves nothing of its own.

The races are made deterministic: the link is planted when the staging folder is made (just before the
writes), or the move's check is told the name is free while the link is already there.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

import pytest

from ktinfra import facts as host_facts
from ktinfra.facts import capture as capture_module

SECRET = "not the capture's\n"


@pytest.fixture
def victim(tmp_path, monkeypatch) -> Path:
    """A private file a planted link points to, and a capture that collects lscpu.txt alone."""
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    path = tmp_path / "victim"
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


def _plant_in_staging(monkeypatch, victim: Path) -> None:
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(*args, **kwargs):
        staging = real_mkdtemp(*args, **kwargs)
        (Path(staging) / "lscpu.txt").symlink_to(victim)
        return staging

    monkeypatch.setattr(capture_module.tempfile, "mkdtemp", mkdtemp)


def _untouched(victim: Path) -> bool:
    return victim.read_text() == SECRET and stat.S_IMODE(victim.stat().st_mode) == 0o600


def test_a_link_in_the_staging_folder_is_not_written_through_new_folder(tmp_path, victim, monkeypatch):
    _plant_in_staging(monkeypatch, victim)
    target = tmp_path / "cap"
    with pytest.raises(FileExistsError) as raised:
        host_facts.write_capture(target)
    assert f"({target / 'lscpu.txt'})" in str(raised.value)
    assert "appeared while the capture was written" in str(raised.value)
    assert _untouched(victim)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim"]  # no capture, no staging folder


def test_a_link_in_the_staging_folder_is_not_written_through_empty_folder(tmp_path, victim, monkeypatch):
    _plant_in_staging(monkeypatch, victim)
    empty = tmp_path / "cap"
    empty.mkdir()
    with pytest.raises(FileExistsError, match=f"cannot write into {empty} "):
        host_facts.write_capture(empty)
    assert _untouched(victim)
    assert list(empty.iterdir()) == []


def test_a_link_that_appears_after_the_move_check_is_refused_not_replaced(tmp_path, victim, monkeypatch):
    """The link is there by the time the files are moved up, and the check (if any) is told the name is
    free: as if the link was planted between the check and the move."""
    empty = tmp_path / "cap"
    empty.mkdir()
    planted = empty / "lscpu.txt"
    real_iterdir, real_exists, real_is_symlink = Path.iterdir, Path.exists, Path.is_symlink

    def iterdir(self):
        if self.parent == empty and self.name.startswith(".capture.") and not planted.is_symlink():
            planted.symlink_to(victim)  # the files are written; the move comes next
        return real_iterdir(self)

    real_listdir = os.listdir

    def listdir(path="."):  # the staging folder listed through its open descriptor (int)
        if isinstance(path, int) and not os.path.lexists(planted):
            planted.symlink_to(victim)
        return real_listdir(path)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    monkeypatch.setattr(capture_module.os, "listdir", listdir)
    monkeypatch.setattr(Path, "exists", lambda self, **kw: self != planted and real_exists(self, **kw))
    monkeypatch.setattr(Path, "is_symlink", lambda self: self != planted and real_is_symlink(self))
    with pytest.raises(FileExistsError, match="appeared while the capture was written"):
        host_facts.write_capture(empty)
    assert os.readlink(planted) == str(victim)  # still the link, not replaced by the capture's file
    assert _untouched(victim)
    assert [p.name for p in real_iterdir(empty)] == ["lscpu.txt"]  # README.md taken back, staging removed


def test_an_empty_folder_on_a_filesystem_without_hard_links_is_still_filled(tmp_path, monkeypatch):
    """vfat and some FUSE filesystems refuse link(2) (EPERM): the files are renamed after the check."""
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})

    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(capture_module.os, "link", no_links)
    empty = tmp_path / "cap"
    empty.mkdir()
    written = host_facts.write_capture(empty)
    assert sorted(p.name for p in written) == ["README.md", "lscpu.txt"]
    assert sorted(p.name for p in empty.iterdir()) == ["README.md", "lscpu.txt"]
    assert (empty / "lscpu.txt").read_text() == "x\n"
    assert stat.S_IMODE((empty / "lscpu.txt").stat().st_mode) == 0o644
