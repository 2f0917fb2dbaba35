"""`ktinfra facts --capture`: the staging folder swapped for a link after the files were written in it.

Whoever may write in the folder the staging folder is made in (the sudo caller's own folder, which a root
capture writes in) can rename the staging folder away and put a link to any folder in its place. The capture
then went by path: a new folder's staging folder was made mode 0755 with chmod (which follows the link: a
private 0700 folder of root's was opened to everyone) and renamed into place (the link became the capture);
filling an empty folder listed the staging folder through the link, hard-linked what was there into the
capture and unlinked it: files of the linked folder were deleted. The staging folder is now held open from
its creation: its mode is set with fchmod, its files are listed, moved and removed through the open folder,
and it is renamed or emptied only while its name still leads to it; else the capture stops, says so, and
removes its own files.

The swap is made deterministic: it happens right after the files are written.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ktinfra import facts as host_facts
from ktinfra.facts import capture as capture_module

SECRET = "root's\n"


@pytest.fixture
def private(tmp_path, monkeypatch) -> Path:
    """A private folder a swapped-in link points to, and a capture that collects lscpu.txt alone."""
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    (folder / "precious.txt").write_text(SECRET)
    return folder


def _swap_after_writing(monkeypatch, where: Path, prefix: str, private: Path, moved: Path) -> None:
    real_write_files = capture_module._write_files

    def write_then_swap(*args):
        real_write_files(*args)
        (staging,) = where.glob(prefix + "*")
        staging.rename(moved)
        staging.symlink_to(private)

    monkeypatch.setattr(capture_module, "_write_files", write_then_swap)


def _untouched(private: Path) -> bool:
    return (
        stat.S_IMODE(private.stat().st_mode) == 0o700
        and sorted(p.name for p in private.iterdir()) == ["precious.txt"]
        and (private / "precious.txt").read_text() == SECRET
    )


def test_a_new_folder_whose_staging_folder_was_swapped_is_refused(tmp_path, private, monkeypatch):
    target, moved = tmp_path / "cap", tmp_path / "moved-away"
    _swap_after_writing(monkeypatch, tmp_path, ".cap.", private, moved)
    with pytest.raises(OSError) as raised:
        host_facts.write_capture(target)
    assert _untouched(private)  # chmod 0755 went to the link's folder before
    assert str(raised.value).startswith(f"cannot write {target}: ")
    assert "staging folder was replaced" in str(raised.value)
    assert not target.is_symlink() and not target.exists()  # the link was renamed into place before
    assert list(moved.iterdir()) == []  # the capture's own files are removed through the open folder


def test_an_empty_folder_whose_staging_folder_was_swapped_is_refused(tmp_path, private, monkeypatch):
    empty, moved = tmp_path / "cap", tmp_path / "moved-away"
    empty.mkdir()
    _swap_after_writing(monkeypatch, empty, ".capture.", private, moved)
    with pytest.raises(OSError) as raised:
        host_facts.write_capture(empty)
    assert _untouched(private)  # precious.txt was moved into the capture, then deleted, before
    assert str(raised.value).startswith(f"cannot write into {empty}: ")
    assert "staging folder was replaced" in str(raised.value)
    assert [p.name for p in empty.iterdir() if not p.is_symlink()] == []  # the link is not the capture's
    assert list(moved.iterdir()) == []


def test_an_unswapped_capture_is_still_written_and_shared(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    for target in (tmp_path / "new", tmp_path / "empty"):
        if target.name == "empty":
            target.mkdir()
        host_facts.write_capture(target)
        assert sorted(p.name for p in target.iterdir()) == ["README.md", "lscpu.txt"]
        assert (target / "lscpu.txt").read_text() == "x\n"
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "new"]
