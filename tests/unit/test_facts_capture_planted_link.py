"""`ktinfra facts --capture DIR` through a link another user planted in a sticky world-writable folder
(/tmp): the capture resolved the link itself (realpath), which the kernel's fs.protected_symlinks does not
stop, and wrote its files wherever the link pointed. A link of one's own there is still followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import facts as host_facts
from ktinfra.cli import app
from ktinfra.facts import capture as capture_module

NOBODY = 65534


@pytest.fixture
def sticky(tmp_path, monkeypatch) -> Path:
    """A /tmp-like folder (mode 1777) under tmp_path, and a capture that collects one file."""
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    folder = tmp_path / "tmp"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


@pytest.fixture
def plant(monkeypatch):
    """Makes `link` -> `to` owned by nobody: root gives it away (lchown); another user cannot, so lstat
    reports nobody as that link's owner instead."""
    planted: set[str] = set()
    real_lstat = os.lstat

    def lstat(path, *args, **kwargs):
        info = real_lstat(path, *args, **kwargs)
        if os.fspath(path) not in planted:
            return info
        fields = list(info[:10])
        fields[4] = NOBODY  # st_uid
        return os.stat_result(fields)

    if os.geteuid() != 0:
        monkeypatch.setattr(capture_module.os, "lstat", lstat)

    def make(link: Path, to: Path) -> Path:
        link.symlink_to(to)
        if os.geteuid() == 0:
            os.lchown(link, NOBODY, NOBODY)
        planted.add(os.fspath(link))
        return link

    return make


def test_a_link_planted_by_another_user_is_refused_before_anything_is_written(sticky, tmp_path, plant):
    victim = tmp_path / "etc-like"
    victim.mkdir()
    link = plant(sticky / "cap", victim)
    with pytest.raises(PermissionError) as raised:
        host_facts.write_capture(link)
    message = str(raised.value)
    assert f"refusing to follow the link {link} (to {victim})" in message
    assert f"owned by uid {NOBODY}" in message
    assert list(victim.iterdir()) == []
    assert sorted(p.name for p in sticky.iterdir()) == ["cap"]


def test_a_planted_link_above_the_capture_folder_is_refused(sticky, tmp_path, plant):
    """/tmp/x -> /etc, then `--capture /tmp/x/new/cap` made /etc/new/cap."""
    victim = tmp_path / "etc-like"
    victim.mkdir()
    plant(sticky / "x", victim)
    with pytest.raises(PermissionError, match=f"refusing to follow the link {sticky / 'x'} "):
        host_facts.write_capture(sticky / "x" / "new" / "cap")
    assert list(victim.iterdir()) == []


def test_a_chain_through_an_own_link_to_a_planted_one_is_refused(sticky, tmp_path, plant):
    victim = tmp_path / "etc-like"
    victim.mkdir()
    plant(sticky / "x", victim)
    (tmp_path / "mine").symlink_to(sticky / "x")
    with pytest.raises(PermissionError, match=f"refusing to follow the link {sticky / 'x'} "):
        host_facts.write_capture(tmp_path / "mine")
    assert list(victim.iterdir()) == []


def test_the_cli_says_why_in_one_line(sticky, tmp_path, plant):
    victim = tmp_path / "etc-like"
    victim.mkdir()
    link = plant(sticky / "cap", victim)
    result = CliRunner().invoke(app, ["facts", "--capture", str(link)])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: refusing to follow the link {link} ")
    assert list(victim.iterdir()) == []


def test_an_own_link_in_the_sticky_folder_is_still_followed(sticky, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (sticky / "cap").symlink_to(real)
    host_facts.write_capture(sticky / "cap")
    assert sorted(p.name for p in real.iterdir()) == ["README.md", "lscpu.txt"]


def test_a_new_folder_in_the_sticky_folder_is_made_there(sticky):
    host_facts.write_capture(sticky / "new")
    assert sorted(p.name for p in (sticky / "new").iterdir()) == ["README.md", "lscpu.txt"]


@pytest.fixture
def give_away(monkeypatch):
    """Makes a folder another user's (nobody's): root chowns it; another user cannot, so stat says so."""
    given: set[str] = set()
    real_stat = os.stat

    def fake_stat(path, *args, **kwargs):
        info = real_stat(path, *args, **kwargs)
        if os.fspath(path) not in given:
            return info
        fields = list(info[:10])
        fields[4] = NOBODY
        return os.stat_result(fields)

    if os.geteuid() != 0:
        monkeypatch.setattr(capture_module.os, "stat", fake_stat)

    def make(folder: Path) -> Path:
        folder.mkdir()
        folder.chmod(0o777)
        if os.geteuid() == 0:
            os.chown(folder, NOBODY, NOBODY)
        given.add(os.fspath(folder))
        return folder

    return make


def test_an_empty_folder_another_user_made_is_not_filled(sticky, give_away):
    """/tmp/cap made empty by another user: its owner could swap the staging folder inside it for a link to
    /etc while the commands ran (a minute), and the files were written there."""
    folder = give_away(sticky / "cap")
    with pytest.raises(PermissionError) as raised:
        host_facts.write_capture(folder)
    assert str(raised.value).startswith(f"{folder} is owned by uid {NOBODY}, not by you")
    assert list(folder.iterdir()) == []


def test_no_folder_is_made_inside_another_users_folder(tmp_path, give_away, monkeypatch):
    """`--capture /home/eve/cap` as root: eve may rename the staging folder made in her folder (or a parent
    made for the capture) and put a link to /etc in its place while the commands run."""
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    eve = give_away(tmp_path / "eve")
    for target in (eve / "cap", eve / "new" / "deeper" / "cap"):
        with pytest.raises(PermissionError) as raised:
            host_facts.write_capture(target)
        assert str(raised.value).startswith(f"{target}: {eve} (where it is made) is owned by uid {NOBODY}")
    assert list(eve.iterdir()) == []


def test_a_relative_path_in_a_deleted_current_folder_is_a_sentence(tmp_path, monkeypatch):
    """The link check asks for the current folder: a deleted one gave '[Errno 2] No such file or directory'
    (the capture before it said 'cannot create cap: ...')."""
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(FileNotFoundError) as raised:
        host_facts.write_capture("cap")
    assert str(raised.value) == "cannot create cap in the current folder: No such file or directory"


SUDO_CASES = [(NOBODY, 0o755, False), (NOBODY, 0o777, True), (NOBODY + 1, 0o755, True), (None, 0o755, True)]


@pytest.mark.parametrize(("sudo_uid", "mode", "refused"), SUDO_CASES)
def test_under_sudo_the_callers_own_folder_is_written_in(
    tmp_path, give_away, monkeypatch, sudo_uid, mode, refused
):
    """`sudo ktinfra facts --capture cap` in eve's home, by eve: she asked for the files there, and no one
    else may write in it, so it is not refused (ea459b9 refused every root capture into a user's home). Her
    folder writable by others, another sudo caller's, or no sudo: refused as before."""
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})
    monkeypatch.setattr(capture_module.os, "geteuid", lambda: 0)
    if sudo_uid is None:
        monkeypatch.delenv("SUDO_UID", raising=False)
    else:
        monkeypatch.setenv("SUDO_UID", str(sudo_uid))
    eve = give_away(tmp_path / "eve")
    eve.chmod(mode)
    if refused:
        with pytest.raises(PermissionError, match="not by you"):
            host_facts.write_capture(eve / "cap")
    else:
        host_facts.write_capture(eve / "cap")
        assert sorted(p.name for p in (eve / "cap").iterdir()) == ["README.md", "lscpu.txt"]
