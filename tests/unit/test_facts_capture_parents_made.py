"""`ktinfra facts --capture a/b/cap`: the missing folders above the capture folder (a, b) were made and,
after a failure, removed by path. A stop (Ctrl-C, SIGTERM) while they were made left the ones made so far:
the list of them was handed back only once all were made. A folder another process made between the check
and the mkdir (two captures into new sibling folders) failed the capture with "File exists". A folder the
capture made and the user replaced meanwhile (rm -r a; mkdir a) was removed after a failure: the user's.

The races are made deterministic by a wrapper around os.mkdir (pathlib's mkdir calls it too)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from ktinfra import facts as host_facts
from ktinfra.facts import capture as capture_module

REAL_MKDIR = os.mkdir
STOPS = [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, SystemExit)]


def named(path, name: str) -> bool:
    return os.path.basename(os.fspath(path)) == name


@pytest.fixture(autouse=True)
def small_capture(monkeypatch):
    monkeypatch.setattr(capture_module, "collect_live", lambda: {"lscpu.txt": "x\n"})


@pytest.fixture
def ctrl_c_raises():
    # CI starts the tests in the background (`cmd &`), which inherits SIGINT ignored, and python then installs
    # no KeyboardInterrupt handler (the signal was dropped: CI's "DID NOT RAISE"): a terminal's python has it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _fail(monkeypatch, before=lambda: None) -> None:
    def collect():
        before()
        raise RuntimeError("the commands failed")

    monkeypatch.setattr(capture_module, "collect_live", collect)


@pytest.mark.usefixtures("ctrl_c_raises")
@pytest.mark.parametrize(("number", "raised"), STOPS)
def test_a_stop_right_after_a_parent_is_made_leaves_no_folder(tmp_path, monkeypatch, number, raised):
    def mkdir(path, *args, **kwargs):
        REAL_MKDIR(path, *args, **kwargs)
        if named(path, "a"):
            # the signal comes as the first parent is made, to this thread: sent to the process the kernel may
            # hand it to a thread that does not hold it (pytest-xdist's execnet I/O thread: CI saw no raise)
            signal.pthread_kill(threading.get_ident(), number)

    monkeypatch.setattr(os, "mkdir", mkdir)
    with pytest.raises(raised):
        host_facts.write_capture(tmp_path / "a" / "b" / "cap")
    assert list(tmp_path.iterdir()) == []  # before: a was left


def test_a_parent_another_process_made_meanwhile_is_used(tmp_path, monkeypatch):
    def mkdir(path, *args, **kwargs):
        if named(path, "a") and not (tmp_path / "a").exists():
            REAL_MKDIR(tmp_path / "a")  # another capture makes it first
        REAL_MKDIR(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    # before: "cannot create ...: File exists"
    written = host_facts.write_capture(tmp_path / "a" / "b" / "cap")
    assert (tmp_path / "a" / "b" / "cap" / "lscpu.txt").read_text() == "x\n"
    assert tmp_path / "a" / "b" / "cap" / "lscpu.txt" in written


def test_a_parent_another_process_made_meanwhile_stays_after_a_failure(tmp_path, monkeypatch):
    def mkdir(path, *args, **kwargs):
        if named(path, "a") and not (tmp_path / "a").exists():
            REAL_MKDIR(tmp_path / "a")
        REAL_MKDIR(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    _fail(monkeypatch)
    with pytest.raises(RuntimeError, match="the commands failed"):
        host_facts.write_capture(tmp_path / "a" / "b" / "cap")
    assert [p.name for p in tmp_path.iterdir()] == ["a"]  # not the capture's: kept
    assert list((tmp_path / "a").iterdir()) == []  # b was the capture's: removed


def test_a_parent_the_user_replaced_meanwhile_is_not_removed(tmp_path, monkeypatch):
    a = tmp_path / "a"

    def replace():  # rm -r a; mkdir a, while the commands run
        (a / "b").rmdir()
        a.rmdir()
        REAL_MKDIR(a)

    _fail(monkeypatch, replace)
    with pytest.raises(RuntimeError, match="the commands failed"):
        host_facts.write_capture(a / "b" / "cap")
    assert a.is_dir()  # before: removed


def test_a_parent_that_was_there_before_stays_and_the_made_ones_go(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    _fail(monkeypatch)
    with pytest.raises(RuntimeError, match="the commands failed"):
        host_facts.write_capture(tmp_path / "a" / "b" / "c" / "cap")
    assert [p.name for p in tmp_path.iterdir()] == ["a"]
    assert list((tmp_path / "a").iterdir()) == []


def test_a_parent_that_cannot_be_made_is_named_and_nothing_stays(tmp_path, monkeypatch):
    def mkdir(path, *args, **kwargs):
        if named(path, "b"):
            raise PermissionError(13, "Permission denied")
        REAL_MKDIR(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    target = tmp_path / "a" / "b" / "cap"
    with pytest.raises(PermissionError, match=f"cannot create {tmp_path / 'a' / 'b'} for {target}"):
        host_facts.write_capture(target)
    assert list(tmp_path.iterdir()) == []
