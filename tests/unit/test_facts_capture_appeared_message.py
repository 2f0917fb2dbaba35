"""`ktinfra facts --capture`: a name taken after the checks (here a link planted by another process) is
refused, and the error said so in two shapes. Planted in the staging folder: "cannot write T (T/lscpu.txt):
appeared while the capture was written"; planted in an empty folder before the files were moved up: "cannot
write into T: T/lscpu.txt appeared while the capture was written". The sentence was made in three places; it
is one now, and every case names the file the same way.

The races are made deterministic as in test_facts_capture_write_race.py: the link is planted when the staging
folder is made, or when the staging folder is listed for the move (the files are written by then).
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from ktinfra import facts as host_facts
from ktinfra.facts import capture as capture_module

APPEARED = "appeared while the capture was written"


@pytest.fixture
def victim(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    path = tmp_path / "victim"
    path.write_text("not the capture's\n")
    return path


def _plant_in_staging(monkeypatch, victim: Path) -> None:
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(*args, **kwargs):
        staging = real_mkdtemp(*args, **kwargs)
        (Path(staging) / "lscpu.txt").symlink_to(victim)
        return staging

    monkeypatch.setattr(capture_module.tempfile, "mkdtemp", mkdtemp)


def _plant_before_the_move(monkeypatch, empty: Path, victim: Path) -> None:
    """The link appears in the empty folder once the files are written, when the staging folder is listed
    (by Path.iterdir or os.listdir, whichever the capture uses)."""
    planted = empty / "lscpu.txt"

    def plant() -> None:
        if not planted.is_symlink():
            planted.symlink_to(victim)

    real_iterdir, real_listdir = Path.iterdir, os.listdir

    def iterdir(self):
        if self.parent == empty and self.name.startswith(".capture."):
            plant()
        return real_iterdir(self)

    def listdir(path="."):
        if isinstance(path, int) or Path(path).name.startswith(".capture."):
            plant()
        return real_listdir(path)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    monkeypatch.setattr(capture_module.os, "listdir", listdir)


def _refusal(target: Path) -> str:
    with pytest.raises(FileExistsError) as raised:
        host_facts.write_capture(target)
    return str(raised.value)


def test_a_link_in_the_staging_folder_of_a_new_folder(tmp_path, victim, monkeypatch):
    _plant_in_staging(monkeypatch, victim)
    target = tmp_path / "cap"
    assert _refusal(target) == f"cannot write {target} ({target / 'lscpu.txt'}): {APPEARED}"


def test_a_link_in_the_staging_folder_of_an_empty_folder(tmp_path, victim, monkeypatch):
    _plant_in_staging(monkeypatch, victim)
    empty = tmp_path / "cap"
    empty.mkdir()
    assert _refusal(empty) == f"cannot write into {empty} ({empty / 'lscpu.txt'}): {APPEARED}"


def test_a_link_in_the_empty_folder_before_the_move(tmp_path, victim, monkeypatch):
    empty = tmp_path / "cap"
    empty.mkdir()
    _plant_before_the_move(monkeypatch, empty, victim)
    assert _refusal(empty) == f"cannot write into {empty} ({empty / 'lscpu.txt'}): {APPEARED}"


def test_a_link_in_the_empty_folder_without_hard_links(tmp_path, victim, monkeypatch):
    """A filesystem without link(2) (vfat): the name is checked, then renamed."""

    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(capture_module.os, "link", no_links)
    empty = tmp_path / "cap"
    empty.mkdir()
    _plant_before_the_move(monkeypatch, empty, victim)
    assert _refusal(empty) == f"cannot write into {empty} ({empty / 'lscpu.txt'}): {APPEARED}"
    assert os.readlink(empty / "lscpu.txt") == str(victim)
