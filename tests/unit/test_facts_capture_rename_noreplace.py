"""`ktinfra facts --capture NEW`: the staging folder is renamed into place, and a folder that appeared at NEW
in the meantime was taken over: rename(2) replaces an empty folder without a word, so an empty folder someone
made there (another user's, in a shared folder) was deleted and the capture put in its place. The rename is
now renameat2(RENAME_NOREPLACE), which the kernel refuses when the name is taken; where the filesystem or
the C library cannot, the name is checked first and rename(2) run (what is left of the window is documented
in ktinfra/facts/noreplace.py).

The race is made deterministic: the folder appears right after the last check the capture makes."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from ktinfra import facts as host_facts
from ktinfra.facts import capture as capture_module


@pytest.fixture
def appearing(tmp_path, monkeypatch) -> Path:
    """A capture of lscpu.txt alone into tmp_path/cap, where a folder with a file marking it is made right
    after the capture's last check of its staging folder (just before the rename)."""
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    target = tmp_path / "cap"
    real_still_ours = capture_module._still_ours

    def check_then_appear(*args):
        real_still_ours(*args)
        if not target.exists():
            target.mkdir()

    monkeypatch.setattr(capture_module, "_still_ours", check_then_appear)
    return target


def _refused(tmp_path: Path, target: Path) -> None:
    with pytest.raises(FileExistsError) as raised:
        host_facts.write_capture(target)
    assert str(raised.value) == (
        f"cannot write {target}: cap appeared in {tmp_path} while the capture was written; it was left as it "
        "is and nothing was put in place"
    )
    assert target.is_dir() and list(target.iterdir()) == []  # what appeared is as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap"]  # no staging folder left


def test_an_empty_folder_that_appears_before_the_rename_is_not_taken_over(tmp_path, appearing):
    _refused(tmp_path, appearing)


def test_the_kernel_refuses_the_taken_name_where_a_check_would_not(tmp_path, appearing, monkeypatch):
    from ktinfra.facts import noreplace

    assert noreplace._renameat2() is not None  # Debian 12's glibc 2.36 has it
    monkeypatch.setattr(noreplace, "_taken", lambda folder, name: False)  # a check told the name is free
    _refused(tmp_path, appearing)


def test_without_renameat2_the_name_is_checked_before_rename(tmp_path, appearing, monkeypatch):
    from ktinfra.facts import noreplace

    monkeypatch.setattr(noreplace, "_renameat2", lambda: None)
    _refused(tmp_path, appearing)


def test_a_filesystem_that_refuses_the_flag_gets_the_check(tmp_path, appearing, monkeypatch):
    from ktinfra.facts import noreplace

    def refuses_the_flag(*args):
        noreplace.ctypes.set_errno(errno.EINVAL)
        return -1

    monkeypatch.setattr(noreplace, "_renameat2", lambda: refuses_the_flag)
    _refused(tmp_path, appearing)


def test_a_free_name_is_renamed_into_place(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    host_facts.write_capture(tmp_path / "cap")
    assert sorted(p.name for p in (tmp_path / "cap").iterdir()) == ["README.md", "lscpu.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap"]
